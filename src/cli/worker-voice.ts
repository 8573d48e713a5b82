/**
 * What `glidemq worker` says about itself on stderr (its start, a stop asked for, the connection,
 * a paused queue, why it exited): a line for people, or with --log-json one JSON object per line
 * ({ts, level, event, message, ...fields}) for a service's log collector. stdout keeps the job lines.
 */
import { notice, printError, printLogJson, warn } from './output.js';

export type Level = 'info' | 'warn' | 'error';

export interface Voice {
  /** Says `text` (or, with --log-json, the event and its fields). */
  say(level: Level, event: string, text: string, fields?: Record<string, unknown>): void;
  /** Records as JSON (--log-json): a line is never wrapped there. */
  readonly json?: boolean;
}

export function workerVoice(logJson: boolean): Voice {
  // the line people would read goes along as `message`, for log viewers that show one
  if (logJson) return { json: true, say: (level, event, text, fields = {}) => printLogJson(level, event, { message: text, ...fields }) };
  return {
    json: false,
    say: (level, _event, text) => {
      if (level === 'info') notice(text);
      else if (level === 'warn') warn(text);
      else printError(text);
    },
  };
}
