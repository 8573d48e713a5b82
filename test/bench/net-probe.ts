/**
 * What a path to the server really costs per round trip: PINGs one at a time, so the bench can
 * print the delay its proxy adds as measured, not as configured, and calibrate the proxy by it.
 */
import { Redis } from 'ioredis';
import type { DelayProxy } from './delay-proxy.js';
import { median, percentile } from './measure.js';

const WARMUP = 20;

function client(url: string): Redis {
  const u = new URL(url);
  const c = new Redis({ host: u.hostname, port: Number(u.port), lazyConnect: true, maxRetriesPerRequest: 1 });
  c.on('error', () => undefined);
  return c;
}

async function timedPing(c: Redis): Promise<number> {
  const t0 = performance.now();
  await c.ping();
  return performance.now() - t0;
}

/**
 * `n` awaited PINGs on each of two URLs, alternating, so a change in the machine's load shows in
 * both. Returns the round trips (ms) of each.
 */
async function pingPairs(directUrl: string, viaUrl: string, n: number): Promise<{ direct: number[]; via: number[] }> {
  const a = client(directUrl);
  const b = client(viaUrl);
  try {
    await Promise.all([a.connect(), b.connect()]);
    for (let i = 0; i < WARMUP; i++) await Promise.all([a.ping(), b.ping()]);
    const direct: number[] = [];
    const via: number[] = [];
    for (let i = 0; i < n; i++) {
      direct.push(await timedPing(a));
      via.push(await timedPing(b));
    }
    return { direct, via };
  } finally {
    a.disconnect();
    b.disconnect();
  }
}

export interface ProxyCalibration {
  /** Delay each way the proxy stands for (ms). */
  delayMs: number;
  /** Time each chunk is held (ms). */
  holdMs: number;
  directMs: number;
  viaProxyMs: number;
  /** Median PING round trip through the proxy minus direct (ms); the aim is 2 × delayMs. */
  addedMs: number;
  /** The 90th percentile through the proxy minus the direct median. */
  addedP90Ms: number;
}

/** Sets the hold and measures what the proxy adds to a PING round trip with it. */
export async function measureProxy(proxy: DelayProxy, directUrl: string, holdMs: number, n = 250): Promise<ProxyCalibration> {
  await proxy.setHold(holdMs);
  const { direct, via } = await pingPairs(directUrl, proxy.url, n);
  const d = median(direct);
  const v = median(via);
  return { delayMs: proxy.delayMs, holdMs, directMs: d, viaProxyMs: v, addedMs: v - d, addedP90Ms: percentile(via, 90) - d };
}

/**
 * Sets the proxy's hold so that a PING through it takes 2 × its delay longer than a direct one:
 * forwarding and the timer thread's wake-up cost time too, which is taken out of the hold instead
 * of added to it. A few steps of measure-and-correct; the hold whose measurement came closest to
 * the aim is kept. With a small delay the proxy's own cost (about 0.1-0.2 ms per round trip on
 * a busy machine) can exceed the aim even when it holds nothing; the notes show what was reached.
 */
export async function calibrateProxy(proxy: DelayProxy, directUrl: string, steps = 6): Promise<ProxyCalibration> {
  const want = 2 * proxy.delayMs;
  let hold = proxy.delayMs;
  let best: ProxyCalibration | undefined;
  for (let i = 0; i < steps; i++) {
    const c = await measureProxy(proxy, directUrl, hold);
    const err = want - c.addedMs;
    if (!best || Math.abs(err) < Math.abs(want - best.addedMs)) best = c;
    if (Math.abs(err) <= want * 0.03) break;
    // Half the round-trip error falls on each hop; never below holding nothing.
    const next = Math.max(0, hold + err / 2);
    if (next === 0 && hold === 0) break;
    hold = next;
  }
  await proxy.setHold(best!.holdMs);
  return best!;
}

/** One line for the bench's notes. */
export function describeCalibration(c: ProxyCalibration, when: string): string {
  const f = (v: number) => v.toFixed(3);
  return (
    `proxy +${c.delayMs} ms each way (${when}): PING median ${f(c.viaProxyMs)} ms through it vs ${f(c.directMs)} ms direct, ` +
    `so it adds ${f(c.addedMs)} ms per round trip (aim ${f(2 * c.delayMs)}; p90 adds ${f(c.addedP90Ms)}), each chunk held ${f(c.holdMs)} ms`
  );
}
