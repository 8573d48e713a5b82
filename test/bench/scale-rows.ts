/**
 * The rows of the scale section (issue 20, "Scale: how cost grows with the work"). Labels name the
 * full sizes; `--quick` runs them at the smaller sizes of test/bench/scale.ts and says so.
 */
import type { Row } from './report.js';

export const SCALE_ROWS: Row[] = [
  { key: 'scale.depth10k.rate', label: 'scale: process c=10, >= 10k waiting', unit: 'jobs/s', better: 'higher' },
  { key: 'scale.depth100k.rate', label: 'scale: process c=10, >= 100k waiting', unit: 'jobs/s', better: 'higher' },
  { key: 'scale.depth1m.rate', label: 'scale: process c=10, >= 1M waiting', unit: 'jobs/s', better: 'higher' },
  { key: 'scale.depth.flat', label: 'scale: rate at 1M / rate at 10k waiting', unit: '×', better: 'higher', target: { min: 0.8, text: '>= 0.8 (flat)' }, digits: 2 },
  { key: 'scale.depth10k.cpu', label: 'scale: server CPU per job, >= 10k waiting', unit: 'µs', better: 'lower', digits: 1 },
  { key: 'scale.depth100k.cpu', label: 'scale: server CPU per job, >= 100k waiting', unit: 'µs', better: 'lower', digits: 1 },
  { key: 'scale.depth1m.cpu', label: 'scale: server CPU per job, >= 1M waiting', unit: 'µs', better: 'lower', digits: 1 },
  { key: 'scale.mem.job', label: 'scale: memory per waiting job at 1M (100 B)', unit: 'bytes', better: 'lower' },
  { key: 'scale.mem.left', label: 'scale: memory left after the 1M are processed', unit: 'bytes', better: 'lower', target: { max: 1 << 20, text: '< 1 MiB (baseline)' } },
  { key: 'scale.delay.drain', label: 'scale: 100k delayed due at once, due → all done', unit: 'ms', better: 'lower' },
  { key: 'scale.delay.maxcall', label: 'scale: longest server call meanwhile (SLOWLOG)', unit: 'ms', better: 'lower', target: { max: 5, text: '< 5 ms (a few)' }, digits: 2 },
  { key: 'scale.queues.list', label: 'scale: `glidemq queues`, 1,000 queues', unit: 'ms', better: 'lower', target: { max: 1000, text: '< 1 s' } },
  { key: 'scale.queues.heal', label: 'scale: `glidemq heal --all --check`, 1,000 queues', unit: 'ms', better: 'lower', target: { max: 1000, text: '< 1 s' } },
  { key: 'scale.queues.audit', label: 'scale: `glidemq audit`, 1,000 queues', unit: 'ms', better: 'lower', target: { max: 1000, text: '< 1 s' } },
  { key: 'scale.queues.top', label: 'scale: `glidemq top --json` minus its 1 s wait', unit: 'ms', better: 'lower', target: { max: 1000, text: '< 1 s' } },
  { key: 'scale.pay1k.rate', label: 'scale: process c=10, 1 KiB payloads', unit: 'jobs/s', better: 'higher' },
  { key: 'scale.pay1k.mbs', label: 'scale: process c=10, 1 KiB payloads', unit: 'MB/s', better: 'higher', digits: 1 },
  { key: 'scale.pay100k.rate', label: 'scale: process c=10, 100 KiB payloads', unit: 'jobs/s', better: 'higher' },
  { key: 'scale.pay100k.mbs', label: 'scale: process c=10, 100 KiB payloads', unit: 'MB/s', better: 'higher', digits: 1 },
  { key: 'scale.pay1m.rate', label: 'scale: process c=10, 1 MiB payloads', unit: 'jobs/s', better: 'higher' },
  { key: 'scale.pay1m.mbs', label: 'scale: process c=10, 1 MiB payloads', unit: 'MB/s', better: 'higher', digits: 1 },
];
