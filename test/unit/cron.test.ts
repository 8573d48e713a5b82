import { expect } from 'chai';
import { nextCronTime, parseCron, validateCron, validateTimeZone, wallTime, instantOf } from '../../src/engine/scheduling/cron.js';
import { InvalidArgumentError } from '../../src/engine/shared/errors.js';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number | undefined) => (ms === undefined ? 'never' : new Date(ms).toISOString());

/** The next `n` fire times after `from` (ISO strings). */
function series(pattern: string, from: string, n: number, tz?: string): string[] {
  const p = parseCron(pattern);
  const out: string[] = [];
  let t = at(from);
  for (let i = 0; i < n; i++) {
    const next = nextCronTime(p, t, tz);
    out.push(iso(next));
    if (next === undefined) break;
    t = next;
  }
  return out;
}

describe('cron: parsing', () => {
  it('accepts values, ranges, steps, lists and names', () => {
    const p = parseCron('*/15 9-17 1,15 JAN-mar mon-FRI');
    expect(p.minutes.flatMap((v, i) => (v ? [i] : []))).to.deep.equal([0, 15, 30, 45]);
    expect(p.hours.flatMap((v, i) => (v ? [i] : []))).to.deep.equal([9, 10, 11, 12, 13, 14, 15, 16, 17]);
    expect(p.days.flatMap((v, i) => (v ? [i] : []))).to.deep.equal([1, 15]);
    expect(p.months.flatMap((v, i) => (v ? [i] : []))).to.deep.equal([1, 2, 3]);
    expect(p.weekdays.flatMap((v, i) => (v ? [i] : []))).to.deep.equal([1, 2, 3, 4, 5]);
  });

  it('reads a/n as "from a to the end, every n" and a-b/n as a stepped range', () => {
    expect(parseCron('5/20 * * * *').minutes.flatMap((v, i) => (v ? [i] : []))).to.deep.equal([5, 25, 45]);
    expect(parseCron('0 1-10/3 * * *').hours.flatMap((v, i) => (v ? [i] : []))).to.deep.equal([1, 4, 7, 10]);
  });

  it('treats weekday 7 as Sunday and knows the @ macros', () => {
    expect(parseCron('0 0 * * 7').weekdays[0]).to.equal(true);
    expect(series('@hourly', '2024-01-01T10:20:00Z', 2)).to.deep.equal(['2024-01-01T11:00:00.000Z', '2024-01-01T12:00:00.000Z']);
    expect(series('@daily', '2024-01-01T10:20:00Z', 1)).to.deep.equal(['2024-01-02T00:00:00.000Z']);
  });

  const bad: [string, RegExp][] = [
    ['', /empty/],
    ['* * * *', /4 fields/],
    ['* * * * * *', /6 fields/],
    ['60 * * * *', /minute field "60" has 60, outside 0-59/],
    ['* 24 * * *', /hour/],
    ['* * 0 * *', /day of month/],
    ['* * * 13 *', /month/],
    ['* * * * 8', /day of week/],
    ['*/0 * * * *', /invalid step/],
    ['5-1 * * * *', /backwards/],
    ['a * * * *', /not a number/],
    ['1,,2 * * * *', /empty list item/],
    ['* * * FOO *', /not a number or a name/],
  ];
  for (const [pattern, why] of bad) {
    it(`refuses "${pattern}" with a message naming the problem`, () => {
      expect(() => parseCron(pattern)).to.throw(InvalidArgumentError, why);
    });
  }

  it('refuses a pattern that never fires, and an unknown time zone', () => {
    expect(() => validateCron('0 0 30 2 *')).to.throw(InvalidArgumentError, /never fires/);
    expect(() => validateTimeZone('Mars/Olympus')).to.throw(InvalidArgumentError, /unknown time zone "Mars\/Olympus"/);
    expect(validateCron('0 0 29 2 *').source).to.equal('0 0 29 2 *');
  });
});

describe('cron: next fire time (UTC)', () => {
  it('is strictly after the given instant, on a whole minute', () => {
    expect(series('* * * * *', '2024-01-01T10:20:00.000Z', 2)).to.deep.equal(['2024-01-01T10:21:00.000Z', '2024-01-01T10:22:00.000Z']);
    expect(series('* * * * *', '2024-01-01T10:20:59.999Z', 1)).to.deep.equal(['2024-01-01T10:21:00.000Z']);
  });

  it('steps across hours, days, months and years', () => {
    expect(series('30 23 31 12 *', '2024-06-01T00:00:00Z', 2)).to.deep.equal(['2024-12-31T23:30:00.000Z', '2025-12-31T23:30:00.000Z']);
    expect(series('0 0 31 * *', '2024-01-31T00:00:00Z', 3)).to.deep.equal([
      '2024-03-31T00:00:00.000Z',
      '2024-05-31T00:00:00.000Z',
      '2024-07-31T00:00:00.000Z',
    ]);
  });

  it('finds 29 February in the next leap year', () => {
    expect(series('0 12 29 2 *', '2024-03-01T00:00:00Z', 1)).to.deep.equal(['2028-02-29T12:00:00.000Z']);
  });

  it('matches either day field when both are restricted, and only the weekday when the day is *', () => {
    // 1st of the month OR a Monday; 2024-01-01 is a Monday
    expect(series('0 0 1 * MON', '2024-01-01T00:00:00Z', 4)).to.deep.equal([
      '2024-01-08T00:00:00.000Z',
      '2024-01-15T00:00:00.000Z',
      '2024-01-22T00:00:00.000Z',
      '2024-01-29T00:00:00.000Z',
    ]);
    expect(series('0 0 1 * MON', '2024-01-29T00:00:00Z', 1)).to.deep.equal(['2024-02-01T00:00:00.000Z']);
    expect(series('0 9 * * 6,0', '2024-01-01T00:00:00Z', 3)).to.deep.equal([
      '2024-01-06T09:00:00.000Z',
      '2024-01-07T09:00:00.000Z',
      '2024-01-13T09:00:00.000Z',
    ]);
  });

  it('answers undefined for a pattern that never fires', () => {
    expect(nextCronTime(parseCron('0 0 31 4 *'), at('2024-01-01T00:00:00Z'))).to.equal(undefined);
  });
});

describe('cron: time zones', () => {
  it('fires at the local wall time of the zone', () => {
    // 09:00 in New York is 14:00 UTC in winter (EST) and 13:00 UTC in summer (EDT)
    expect(series('0 9 * * *', '2024-01-10T00:00:00Z', 1, 'America/New_York')).to.deep.equal(['2024-01-10T14:00:00.000Z']);
    expect(series('0 9 * * *', '2024-07-10T00:00:00Z', 1, 'America/New_York')).to.deep.equal(['2024-07-10T13:00:00.000Z']);
    expect(series('30 0 * * *', '2024-07-10T00:00:00Z', 1, 'Asia/Kolkata')).to.deep.equal(['2024-07-10T19:00:00.000Z']);
  });

  it('across spring forward, a skipped wall time fires once at the instant after the gap', () => {
    // 2024-03-10: New York clocks jump from 02:00 EST to 03:00 EDT
    expect(series('30 2 * * *', '2024-03-09T12:00:00Z', 3, 'America/New_York')).to.deep.equal([
      '2024-03-10T07:30:00.000Z', // 03:30 EDT (02:30 does not exist that night)
      '2024-03-11T06:30:00.000Z', // 02:30 EDT
      '2024-03-12T06:30:00.000Z',
    ]);
    // an hourly pattern has 23 fires that day, never two at one instant
    const hourly = series('0 * * * *', '2024-03-10T04:30:00Z', 4, 'America/New_York');
    expect(hourly).to.deep.equal(['2024-03-10T05:00:00.000Z', '2024-03-10T06:00:00.000Z', '2024-03-10T07:00:00.000Z', '2024-03-10T08:00:00.000Z']);
  });

  it('across fall back, a repeated wall time fires once (the first time)', () => {
    // 2024-11-03: New York clocks fall back from 02:00 EDT to 01:00 EST; 01:30 happens twice
    expect(series('30 1 * * *', '2024-11-02T12:00:00Z', 2, 'America/New_York')).to.deep.equal([
      '2024-11-03T05:30:00.000Z', // 01:30 EDT
      '2024-11-04T06:30:00.000Z', // 01:30 EST next day
    ]);
    expect(series('30 1 * * *', '2024-11-03T05:30:00Z', 1, 'America/New_York')).to.deep.equal(['2024-11-04T06:30:00.000Z']);
  });

  it('converts between instants and wall times', () => {
    const instant = at('2024-07-01T12:00:00Z');
    const wall = wallTime(instant, 'Europe/Berlin');
    expect(iso(wall)).to.equal('2024-07-01T14:00:00.000Z');
    expect(instantOf(wall, 'Europe/Berlin')).to.equal(instant);
    expect(wallTime(instant, undefined)).to.equal(instant);
  });
});
