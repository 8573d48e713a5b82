/** `glidemq publish <broadcast> <subject> [data]`: adds one message for every subscription. */
import type { Command } from 'commander';
import { parseInteger } from '../../engine/shared/duration.js';
import { Broadcast } from '../../engine/broadcast/broadcast.js';
import { action } from '../context.js';
import { parseJsonArgument } from '../input.js';
import { print, printJsonLine } from '../output.js';
import { CONFIRM_FLAG, CONFIRM_TIMEOUT_FLAG, confirmFromFlags, exitOneOnConfirmTimeout, type ConfirmFlags } from '../confirm-flag.js';

interface PublishFlags extends ConfirmFlags {
  maxMessages?: string;
}

export function register(program: Command): void {
  program
    .command('publish <broadcast> <subject> [data]')
    .description('publish one message (data: JSON text; default: {}) to every subscription of a broadcast')
    .option('--max-messages <n>', 'keep at most this many messages: the oldest are trimmed, read or not')
    .option(...CONFIRM_FLAG)
    .option(...CONFIRM_TIMEOUT_FLAG)
    .addHelpText(
      'after',
      `
Subjects are dot-separated tokens; subscriptions filter them with * (one token) and > (the rest).

Examples:
  $ glidemq publish orders orders.created '{"id":42}'
  $ glidemq publish orders orders.eu.cancelled '{"id":7}' --max-messages 10000 --json
  $ glidemq worker ./audit.js --broadcast orders --subscription audit --subjects 'orders.>'
  $ glidemq subscriptions orders`,
    )
    .action(
      action(async (ctx, name: string, subject: string, data: string | undefined, flags: PublishFlags) => {
        const maxMessages = flags.maxMessages === undefined ? 0 : parseInteger(flags.maxMessages, '--max-messages', 1);
        const payload = data === undefined ? {} : parseJsonArgument(data, 'data');
        const confirm = confirmFromFlags(flags);
        const b = new Broadcast(name, { connection: ctx.connection, prefix: ctx.prefix, maxMessages, confirm });
        return exitOneOnConfirmTimeout(async () => {
          try {
            const id = await b.publish(subject, payload);
            if (ctx.json) printJsonLine({ id, broadcast: name, subject });
            else print(id);
          } finally {
            await b.close();
          }
          return 0;
        });
      }),
    );
}
