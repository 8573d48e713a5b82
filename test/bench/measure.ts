/**
 * Measuring helpers for the benchmark: medians and percentiles, the server's INFO sections, and a
 * count of the commands clients send (every ioredis client of the process, both libraries).
 */
import { Redis } from 'ioredis';

export function median(xs: number[]): number {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

/** Nearest-rank percentile (p in 0..100) of unsorted samples. */
export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const v = [...xs].sort((a, b) => a - b);
  const rank = Math.min(v.length - 1, Math.max(0, Math.ceil((p / 100) * v.length) - 1));
  return v[rank];
}

export async function infoSection(r: Redis, section: string): Promise<Record<string, string>> {
  const text = (await r.info(section)) as string;
  const out: Record<string, string> = {};
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/** Seconds of CPU the server process used so far (user + system, all its threads). */
export async function serverCpuSeconds(r: Redis): Promise<number> {
  const cpu = await infoSection(r, 'cpu');
  return Number(cpu.used_cpu_user) + Number(cpu.used_cpu_sys);
}

export interface CommandStat {
  calls: number;
  usec: number;
}

/** INFO commandstats as name → calls/usec (commands run inside scripts/functions are counted too). */
export async function commandStats(r: Redis): Promise<Map<string, CommandStat>> {
  const raw = await infoSection(r, 'commandstats');
  const out = new Map<string, CommandStat>();
  for (const [key, value] of Object.entries(raw)) {
    if (!key.startsWith('cmdstat_')) continue;
    const calls = Number(/calls=(\d+)/.exec(value)?.[1] ?? 0);
    const usec = Number(/usec=(\d+)/.exec(value)?.[1] ?? 0);
    out.set(key.slice('cmdstat_'.length), { calls, usec });
  }
  return out;
}

/** Commands whose server time already includes every command they ran inside. */
export const SCRIPT_COMMANDS = new Set(['fcall', 'fcall_ro', 'evalsha', 'evalsha_ro', 'eval', 'eval_ro']);

/**
 * Counts commands handed to the socket by every ioredis client in this process (queues and
 * workers of both libraries), except the clients marked as the benchmark's own. These are the
 * client round trips a server sees: a function or script call counts once, whatever it runs.
 */
class SentCommands {
  private counting = false;
  readonly byName = new Map<string, number>();
  total = 0;
  private readonly excluded = new WeakSet<object>();

  install(): void {
    const proto = Redis.prototype as unknown as { sendCommand: (cmd: { name: string }, ...rest: unknown[]) => unknown };
    const original = proto.sendCommand;
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    proto.sendCommand = function (this: object, cmd: { name: string }, ...rest: unknown[]) {
      if (self.counting && !self.excluded.has(this)) {
        self.total++;
        self.byName.set(cmd.name, (self.byName.get(cmd.name) ?? 0) + 1);
      }
      return original.call(this, cmd, ...rest);
    };
  }

  exclude(client: object): void {
    this.excluded.add(client);
  }

  start(): void {
    this.byName.clear();
    this.total = 0;
    this.counting = true;
  }

  stop(): void {
    this.counting = false;
  }
}

export const sentCommands = new SentCommands();

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
