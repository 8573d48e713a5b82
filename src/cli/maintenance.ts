/** What `pel`, `reclaim` and `heal` share: one upkeep connection, and named queues that must exist. */
import { invalid } from '../engine/shared/errors.js';
import { MaintenanceSession, type Maintenance, type MaintenanceSettings } from '../engine/administering/maintenance.js';
import type { CommandContext } from './context.js';

export async function withMaintenance<T>(ctx: CommandContext, body: (s: MaintenanceSession) => Promise<T>): Promise<T> {
  const session = await MaintenanceSession.open(ctx.connection, ctx.prefix, ctx.where);
  try {
    return await body(session);
  } finally {
    await session.close();
  }
}

/** The queue's upkeep, or a usage error naming the queue when it does not exist (a typo, usually). */
export async function existingQueue(
  s: MaintenanceSession,
  ctx: CommandContext,
  name: string,
  settings: Partial<MaintenanceSettings> = {},
): Promise<Maintenance> {
  const m = s.queue(name, settings);
  if (!(await m.queueExists())) {
    throw invalid(`queue "${name}" does not exist under prefix "${ctx.prefix}" at ${ctx.where} (glidemq queues lists them)`);
  }
  return m;
}
