/**
 * Server replies that list names and values in turn (HGETALL, XINFO, CONFIG GET, a claim's extra
 * fields): read the same way everywhere. A trailing name without a value is dropped.
 */

/** The pairs of `list` from index `from` as a record (later names win). */
export function pairsToRecord<V = unknown>(list: readonly unknown[], from = 0): Record<string, V> {
  const out: Record<string, V> = {};
  for (let i = from; i + 1 < list.length; i += 2) out[String(list[i])] = list[i + 1] as V;
  return out;
}

/**
 * The pairs of a reply as a map; a reply that is not a list (RESP3 may answer a map as an object)
 * is read by its entries. Anything else gives an empty map.
 */
export function pairsToMap(reply: unknown): Map<string, unknown> {
  const out = new Map<string, unknown>();
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) out.set(String(reply[i]), reply[i + 1]);
  } else if (reply && typeof reply === 'object') {
    for (const [k, v] of Object.entries(reply)) out.set(k, v);
  }
  return out;
}
