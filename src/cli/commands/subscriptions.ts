/**
 * `glidemq subscriptions <broadcast>`: where each subscription of a broadcast is: messages kept
 * that it has not read (lag), messages `maxMessages` trimmed before it read them (trimmed unread:
 * it never gets them), claims unfinished, consumers.
 */
import type { Command } from 'commander';
import { Broadcast, type SubscriptionInfo } from '../../engine/broadcast/broadcast.js';
import { action } from '../context.js';
import { colour, print, printJson, table, plural } from '../output.js';

export function register(program: Command): void {
  program
    .command('subscriptions <broadcast>')
    .description("a broadcast's subscriptions: unread (lag), trimmed before read, pending, consumers")
    .addHelpText(
      'after',
      `
Columns:
  lag             kept messages the subscription has not read yet
  trimmed-unread  messages published after its position that --max-messages trimmed before it
                  read them: it never gets them (a subscription that falls this far behind
                  needs a larger cap, or faster workers)
  pending         messages its workers claimed and have not finished (running or waiting to
                  retry)

A "?" (null with --json) is a number the server cannot tell.

Examples:
  $ glidemq subscriptions orders
  $ glidemq subscriptions orders --json`,
    )
    .action(
      action(async (ctx, name: string) => {
        const b = new Broadcast(name, { connection: ctx.connection, prefix: ctx.prefix });
        let subs: SubscriptionInfo[];
        let kept: number;
        try {
          [subs, kept] = await Promise.all([b.subscriptions(), b.length()]);
        } finally {
          await b.close();
        }
        if (ctx.json) {
          printJson(subs);
          return 0;
        }
        if (subs.length === 0) {
          print(colour.dim(`no subscriptions on broadcast "${name}" at ${ctx.where}`));
          return 0;
        }
        const n = (v: number | null) => (v === null ? '?' : v);
        print(
          table({
            head: ['subscription', 'lag', 'trimmed-unread', 'pending', 'consumers', 'last delivered'],
            rows: subs.map((s) => [s.name, n(s.lag), n(s.trimmedUnread), s.pending, s.consumers, s.lastDeliveredId]),
            numeric: [1, 2, 3, 4],
          }),
        );
        print(colour.dim(`${plural(kept, 'message')} kept`));
        return 0;
      }),
    );
}
