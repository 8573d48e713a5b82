/** `glidemq heal <queue...>` / `glidemq heal --all`: list-active repair and idle-consumer cleanup, for cron. */
import type { Command } from 'commander';
import { listQueues } from '../../engine/connecting/discovery.js';
import { invalid } from '../../engine/shared/errors.js';
import type { HealReport, Maintenance } from '../../engine/administering/maintenance.js';
import { action } from '../context.js';
import { existingQueue, withMaintenance } from '../maintenance.js';
import { colour, plural, print, printJsonLine } from '../output.js';

interface HealFlags {
  all?: boolean;
  check?: boolean;
  verbose?: boolean;
}

function describe(r: HealReport): string {
  const c = r.check;
  const parts: string[] = [];
  if (r.reseeded) {
    parts.push(
      c
        ? `the list-active-ids set needs a re-seed (seed marker missing or fewer members than the counter, ${r.counterBefore})`
        : `re-seeded the list-active-ids set from a scan (${plural(r.calls, 'call')}, ${plural(r.membersAdded, 'claim')} added)`,
    );
  }
  if (r.counterBefore !== r.counterAfter) parts.push(`list-active counter ${r.counterBefore} → ${r.counterAfter}${c ? ' needed' : ''}`);
  if (r.membersDropped > 0) parts.push(`${c ? 'would drop' : 'dropped'} ${plural(r.membersDropped, 'member')} that no longer are claims`);
  if (r.consumersRemoved > 0) parts.push(`${c ? 'would remove' : 'removed'} ${plural(r.consumersRemoved, 'idle consumer')}`);
  if (r.flowsRolledForward) parts.push(`${c ? 'would roll forward' : 'rolled forward'} ${plural(r.flowsRolledForward, 'flow')} a producer left half stored`);
  if (r.outboxRelayed) parts.push(`${c ? 'would relay' : 'relayed'} ${plural(r.outboxRelayed, 'flow outbox record')} a crash left`);
  if (r.parentsReleased) parts.push(`${c ? 'would queue' : 'queued'} ${plural(r.parentsReleased, 'parent')} left waiting with no dependency`);
  if (r.settlementsRepaired) parts.push(`${c ? 'would settle' : 'settled'} ${plural(r.settlementsRepaired, 'finished child', 'finished children')} into a waiting parent again`);
  if (parts.length === 0) return colour.dim(`ok (${plural(r.counterAfter, 'priority/LIFO claim')})`);
  return parts.join('; ');
}

export function register(program: Command): void {
  program
    .command('heal [queues...]')
    .description('repair the list-active bookkeeping of priority/LIFO claims and remove consumers of dead workers')
    .option('--all', 'every queue under the prefix')
    .option('--check', 'change nothing; exit 1 when drift exists')
    .option('--verbose', 'report every queue, also when nothing changed')
    .addHelpText(
      'after',
      `
Runs glidemq_healListActive (what each worker runs every 10th promotion tick), carried through to
the end of a re-seed, and removes consumers that hold nothing and have been idle for 5 minutes.
On a cluster it also rolls forward flows a producer left half stored across hash slots, and settles
again finished children a failover of their parent's node left counted as unsettled. Everywhere it
relays flow outbox records a crash left and queues parents left waiting with no dependency; with
--check each of these counts as drift.
Silent when nothing changed, so it fits cron; --json prints one object per queue per line.

Examples:
  $ glidemq heal emails images
  $ glidemq heal --all --verbose
  $ glidemq heal --all --check || echo "list-active drift found"
  */15 * * * *  glidemq heal --all --url redis://queue-host:6379`,
    )
    .action(
      action(async (ctx, named: string[], flags: HealFlags) => {
        if (flags.all && named.length > 0) throw invalid('give queue names or --all, not both');
        if (!flags.all && named.length === 0) throw invalid('name at least one queue, or use --all');
        const reports = await withMaintenance(ctx, async (s) => {
          const names = flags.all ? await listQueues(s.client, ctx.prefix) : named;
          const queues: Maintenance[] = [];
          for (const name of names) queues.push(await existingQueue(s, ctx, name));
          const out: HealReport[] = [];
          for (const m of queues) out.push(await m.heal({ check: !!flags.check }));
          return out;
        });
        for (const r of reports) {
          if (ctx.json) {
            printJsonLine({
              queue: r.queue,
              counterBefore: r.counterBefore,
              counterAfter: r.counterAfter,
              membersDropped: r.membersDropped,
              membersAdded: r.membersAdded,
              consumersRemoved: r.consumersRemoved,
              flowsRolledForward: r.flowsRolledForward ?? 0,
              settlementsRepaired: r.settlementsRepaired ?? 0,
              outboxRelayed: r.outboxRelayed ?? 0,
              parentsReleased: r.parentsReleased ?? 0,
              seeded: r.seeded,
              reseeded: r.reseeded,
              drift: r.drift,
              check: r.check,
            });
          } else if (flags.verbose || r.drift || r.consumersRemoved > 0 || r.flowsRolledForward || r.settlementsRepaired || r.outboxRelayed || r.parentsReleased) {
            print(`${r.queue}: ${describe(r)}`);
          }
        }
        if (flags.verbose && !ctx.json && reports.length === 0) print(colour.dim(`no queues under prefix "${ctx.prefix}"`));
        return flags.check && reports.some((r) => r.drift) ? 1 : 0;
      }),
    );
}
