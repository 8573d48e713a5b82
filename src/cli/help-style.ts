/**
 * How every command's help looks: the global options under each command (`glidemq stats --help`
 * shows --url too), one style for defaults, and lines wrapped to the terminal.
 *
 * Defaults: every option and argument says its default the same way, last in its description:
 * `(default: 30s)`. A default commander knows (a value given to .option()) is written so, without
 * commander's JSON quotes; one it cannot know (read from an environment variable, or left to the
 * engine) is set as the option's defaultValueDescription, or written in the description in that
 * same form. (A test walks the tree and holds every description to it.)
 *
 * Width: the terminal's width on a terminal (commander's own rule); piped into `less` or a file,
 * $COLUMNS when the shell exports it, else 80. Commander wraps the descriptions it lays out; the
 * prose each command adds after them (addHelpText) is wrapped here as it is written: a paragraph
 * (lines starting at column 0) that does not fit is filled again to the width (a line that follows
 * the end of a sentence still starts a line), an indented line that does not fit is wrapped under
 * its description column. An example command line (`  $ ...`) that does not fit is laid out as a
 * shell reads it: its remark (after two spaces) goes on the next line as a `# comment`, and a
 * command still too long is broken between words (never inside quotes) with a `\` at the end of
 * each line but the last, so it can still be copied and run.
 */
import type { Argument, Command, Option } from 'commander';

function shown(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** `(choices: a, b, default: x)` after the description, as commander would, in the one style. */
function described(text: string, o: { argChoices?: string[]; defaultValue?: unknown; defaultValueDescription?: string }, showDefault: boolean): string {
  const extra: string[] = [];
  if (o.argChoices) extra.push(`choices: ${o.argChoices.join(', ')}`);
  if (showDefault && o.defaultValueDescription) extra.push(`default: ${o.defaultValueDescription}`);
  else if (showDefault && o.defaultValue !== undefined) extra.push(`default: ${shown(o.defaultValue)}`);
  if (extra.length === 0) return text;
  return text ? `${text} (${extra.join(', ')})` : `(${extra.join(', ')})`;
}

function optionDescription(option: Option): string {
  // a flag without a value (--json) defaults to "not given": nothing to say
  const takesValue = option.required || option.optional;
  const withEnv = option.envVar ? `${option.description} (env: ${option.envVar})` : option.description;
  return described(withEnv, option, takesValue);
}

function argumentDescription(argument: Argument): string {
  return described(argument.description, argument, true);
}

/** The width help is wrapped to on this stream. */
function helpWidth(stream: NodeJS.WriteStream): number {
  if (stream.isTTY && stream.columns) return stream.columns;
  const columns = Number(process.env.COLUMNS);
  return Number.isInteger(columns) && columns > 0 ? columns : 80;
}

/** Words filled into lines of at most `width` (after `indent`); a longer word has a line to itself. */
function fill(words: string[], width: number, first: string, indent: string): string[] {
  const lines: string[] = [];
  let line = first;
  let empty = true;
  for (const word of words) {
    if (!empty && line.length + 1 + word.length > width) {
      lines.push(line);
      line = indent + word;
    } else line = empty ? line + word : `${line} ${word}`;
    empty = false;
  }
  lines.push(line);
  return lines;
}

/**
 * The words of a command line and its remark: split at spaces outside quotes; the remark is what
 * follows the first run of two spaces or more.
 */
function commandWords(text: string): { words: string[]; remark: string } {
  const words: string[] = [];
  let word = '';
  let quote = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      word += c;
      if (c === '\\' && quote === '"' && i + 1 < text.length) word += text[++i];
      else if (c === quote) quote = '';
    } else if (c === ' ') {
      if (word) words.push(word);
      word = '';
      if (text[i + 1] === ' ' && words.length) return { words, remark: text.slice(i).trim() };
    } else {
      if (c === "'" || c === '"') quote = c;
      word += c;
    }
  }
  if (word) words.push(word);
  return { words, remark: '' };
}

/** An example command line (`  $ cmd  remark`) fitted to `width` as a shell reads it (see the header). */
function fitExample(line: string, width: number): string[] {
  if (line.length <= width) return [line];
  const at = line.indexOf('$ ');
  const lead = line.slice(0, at + 2);
  const { words, remark } = commandWords(line.slice(at + 2));
  const hang = ' '.repeat(at + 4);
  const lines: string[] = [];
  let current = lead;
  for (const word of words) {
    // room for the word and, unless it is the last, the " \" that continues the line
    if (current !== lead && current !== hang && current.length + 1 + word.length + 2 > width) {
      lines.push(`${current} \\`);
      current = hang + word;
    } else current = current === lead || current === hang ? current + word : `${current} ${word}`;
  }
  lines.push(current);
  if (remark) lines.push(...fill(remark.split(/\s+/), width, `${hang}# `, `${hang}# `));
  return lines;
}

/** Help text with its prose fitted to `width` (see the header). */
export function wrapHelpText(text: string, width: number): string {
  const out: string[] = [];
  let paragraph: string[] = [];
  const endParagraph = () => {
    if (!paragraph.some((l) => l.length > width)) out.push(...paragraph);
    else {
      // a line after one that ends a sentence starts where the author started it ("Exit codes: ...")
      let sentences: string[] = [];
      for (const [i, line] of paragraph.entries()) {
        sentences.push(line);
        if (i === paragraph.length - 1 || /[.!?]$/.test(line)) {
          out.push(...fill(sentences.join(' ').split(/\s+/).filter(Boolean), width, '', ''));
          sentences = [];
        }
      }
    }
    paragraph = [];
  };
  for (const line of text.split('\n')) {
    if (line.trim() !== '' && !/^\s/.test(line)) {
      paragraph.push(line);
      continue;
    }
    endParagraph();
    if (line.length <= width) {
      out.push(line);
      continue;
    }
    if (/^\s+\$ /.test(line)) {
      out.push(...fitExample(line, width));
      continue;
    }
    // "  term   description": continue under the description; else under the line's own indent
    const lead = /^(\s+\S+(?: \S+)*\s{2,})\S/.exec(line)?.[1] ?? /^\s*/.exec(line)![0];
    const hang = lead.length < width / 2 ? ' '.repeat(lead.length) : /^\s*/.exec(line)![0];
    out.push(...fill(line.slice(lead.length).split(/\s+/).filter(Boolean), width, lead, hang));
  }
  endParagraph();
  return out.join('\n');
}

/** Applies the help style to the program; call before any command is added (they inherit it). */
export function configureHelpStyle(program: Command): void {
  program.configureHelp({ showGlobalOptions: true, minWidthToWrap: 24, optionDescription, argumentDescription });
  program.configureOutput({
    getOutHelpWidth: () => helpWidth(process.stdout),
    getErrHelpWidth: () => helpWidth(process.stderr),
    // commander writes help (and --version) through these, each added text as a piece of its own
    writeOut: (str) => process.stdout.write(wrapHelpText(str, helpWidth(process.stdout))),
    writeErr: (str) => process.stderr.write(wrapHelpText(str, helpWidth(process.stderr))),
  });
}
