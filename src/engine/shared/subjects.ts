/**
 * Broadcast subjects and subscription filters. A subject is dot-separated tokens (`orders.eu.created`).
 * A filter token `*` matches exactly one token; `>` as the last token matches one or more trailing
 * tokens (`orders.>` matches `orders.eu` and `orders.eu.created`, not `orders`).
 */
import { invalid } from './errors.js';

export const MAX_SUBJECT = 512;

function tokensOf(text: unknown, what: string): string[] {
  if (typeof text !== 'string' || text.length === 0) throw invalid(`${what} must be a non-empty string`);
  if (text.length > MAX_SUBJECT) throw invalid(`${what} is longer than ${MAX_SUBJECT} characters`);
  if (/[\s\p{Cc}]/u.test(text)) throw invalid(`${what} "${text}" may not contain whitespace`);
  const tokens = text.split('.');
  if (tokens.some((t) => t === '')) throw invalid(`${what} "${text}" has an empty token (two dots, or a dot at an end)`);
  return tokens;
}

/** A subject messages are published under: tokens only, no wildcards. */
export function validateSubject(subject: unknown): string {
  const tokens = tokensOf(subject, 'subject');
  if (tokens.some((t) => t === '*' || t === '>')) {
    throw invalid(`subject "${String(subject)}" may not contain the wildcards "*" or ">" (those are for subscription filters)`);
  }
  return subject as string;
}

/** A subscription filter: tokens, `*` for one token, `>` only as the last token. */
export function validatePattern(pattern: unknown): string {
  const tokens = tokensOf(pattern, 'subject filter');
  tokens.forEach((t, i) => {
    if (t === '>' && i !== tokens.length - 1) throw invalid(`subject filter "${String(pattern)}": ">" may only be the last token`);
    if (t !== '*' && t !== '>' && /[*>]/.test(t)) {
      throw invalid(`subject filter "${String(pattern)}": a wildcard must be a whole token ("orders.*", not "orders.a*")`);
    }
  });
  return pattern as string;
}

export function matchSubject(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length) return false;
    if (p[i] !== '*' && p[i] !== s[i]) return false;
  }
  return p.length === s.length;
}

/** A predicate for a list of filters (any match); no filters means every subject. */
export function subjectFilter(patterns: string[] | undefined): (subject: string) => boolean {
  if (!patterns || patterns.length === 0) return () => true;
  const checked = patterns.map(validatePattern);
  return (subject) => checked.some((p) => matchSubject(p, subject));
}
