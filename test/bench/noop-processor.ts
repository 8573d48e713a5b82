/** The no-op processor file the sandboxed rows run, in glidemq's and BullMQ's sandboxes alike. */
export default async function noop(): Promise<null> {
  return null;
}
