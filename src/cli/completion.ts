/**
 * Shell completion scripts (`glidemq completion bash|zsh|fish`), generated from the program's own
 * command tree: every command name, sub-command and flag the help lists, so a new command or flag
 * completes without anyone editing a list. Each script works the same way: it walks the words typed
 * so far, skipping flags and the values of flags that take one, to find the command being typed
 * (`schedulers add`), then offers that command's sub-commands, its flags and the global ones after
 * a `-`, the choices of its argument, the values of a flag that has a few (`jobs --state`), or else
 * file names (a worker's script, a --tls-ca file, a --flow file).
 *
 * Queue names (a command's first argument `<queue>`, and `--queue`) come from the server: the
 * script runs `glidemq <the connection flags typed> completion <shell> --queues`, which lists them
 * through the engine, and offers nothing when it cannot (no server, no answer in time).
 */
import type { Command, Help, Option } from 'commander';

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];

interface Entry {
  name: string;
  description: string;
}

/** One command of the tree, as the scripts need it. */
interface CompletionNode {
  /** Command names from the root, joined by spaces ('' for the program itself). */
  path: string;
  children: Entry[];
  flags: Entry[];
  /** The same flags by option (a short and a long name can belong to one). */
  options: { short?: string; long?: string; description: string; valued: boolean }[];
  /** Flags that take a value: the next word is that value, not a command. */
  valued: string[];
  /** What the command's first argument may be, when it is one of a few words. */
  choices: string[];
  /** The values of the flags that take one of a few words, by flag (short and long name alike). */
  values: Record<string, string[]>;
  /** The command's first argument is a queue (its name is completed from the server). */
  queueArg: boolean;
  /** The flags whose value is a queue name (`worker -q`). */
  queueFlags: string[];
}

/** The global flags that choose the server and prefix: the scripts pass them on when they ask for queue names. */
const CONNECTION_VALUED = ['-u', '--url', '--prefix', '--profile', '--tls-ca'];
const CONNECTION_BARE = ['--cluster', '--no-cluster'];

/**
 * Makes `option`'s values complete in the shells (and its help say "choices: ..."), leaving the
 * check of a value to the command: its own message names what a value may be better than
 * commander's (`jobs --state`). Returns the option.
 */
export function completeWith(option: Option, values: readonly string[]): Option {
  option.argChoices = [...values];
  return option;
}

function flagsOf(option: Option): string[] {
  return [option.short, option.long].filter((f): f is string => !!f);
}

function firstLine(text: string): string {
  return text.split('\n')[0].trim();
}

/** Every command of the tree, the program first. */
export function completionTree(program: Command): CompletionNode[] {
  const help: Help = program.createHelp();
  const nodes: CompletionNode[] = [];
  const visit = (cmd: Command, path: string, inherited: Option[]) => {
    const own = help.visibleOptions(cmd);
    const options = [...own, ...inherited.filter((o) => !own.some((x) => x.long === o.long))];
    const subcommands = help.visibleCommands(cmd);
    const arg = cmd.registeredArguments[0];
    nodes.push({
      path,
      children: subcommands.map((c) => ({ name: c.name(), description: firstLine(c.description()) })),
      flags: options.flatMap((o) => flagsOf(o).map((name) => ({ name, description: firstLine(o.description) }))),
      options: options.map((o) => ({ short: o.short, long: o.long, description: firstLine(o.description), valued: o.required || o.optional })),
      valued: options.filter((o) => o.required || o.optional).flatMap(flagsOf),
      choices: arg?.argChoices ? [...arg.argChoices] : [],
      values: Object.fromEntries(options.filter((o) => o.argChoices).flatMap((o) => flagsOf(o).map((f) => [f, [...o.argChoices!]]))),
      queueArg: /^queues?$/.test(arg?.name() ?? ''),
      queueFlags: options.filter((o) => o.long === '--queue').flatMap(flagsOf),
    });
    // options of a command are recognised after its sub-commands too: they are inherited
    const passedOn = [...options.filter((o) => !o.long || !['--help', '--version'].includes(o.long))];
    for (const sub of subcommands) {
      const subPath = path ? `${path} ${sub.name()}` : sub.name();
      // the implicit `help [command]` is not in cmd.commands: it completes its siblings' names
      if (!cmd.commands.includes(sub)) {
        const siblings = subcommands.filter((c) => c !== sub).map((c) => c.name());
        nodes.push({ path: subPath, children: [], flags: [], options: [], valued: [], choices: siblings, values: {}, queueArg: false, queueFlags: [] });
        continue;
      }
      visit(sub, subPath, passedOn);
    }
  };
  visit(program, '', []);
  return nodes;
}

export function completionScript(program: Command, shell: Shell): string {
  const nodes = completionTree(program);
  const name = program.name();
  if (shell === 'bash') return bashScript(name, nodes);
  if (shell === 'zsh') return zshScript(name, nodes);
  return fishScript(name, nodes);
}

/** A word in single quotes for sh, bash, zsh and fish alike (fish also needs \\ doubled). */
function quote(text: string, fish = false): string {
  const escaped = fish ? text.replace(/\\/g, '\\\\').replace(/'/g, "\\'") : text.replace(/'/g, `'\\''`);
  return `'${escaped}'`;
}

const names = (entries: Entry[]) => entries.map((e) => e.name).join(' ');

function bashScript(name: string, nodes: CompletionNode[]): string {
  const fn = `_${name.replace(/\W/g, '_')}`;
  const cases = nodes
    .map(
      (n) =>
        `    ${quote(n.path)})\n` +
        `      children=${quote(names(n.children))}; flags=${quote(names(n.flags))}\n` +
        `      valued=${quote(n.valued.join(' '))}; choices=${quote(n.choices.join(' '))}; queuearg=${n.queueArg ? 1 : 0} ;;`,
    )
    .join('\n');
  const valueCases = nodes
    .flatMap((n) => Object.entries(n.values).map(([flag, values]) => `    ${quote(`${n.path ? `${n.path} ` : ''}${flag}`)}) values=${quote(values.join(' '))} ;;`))
    .join('\n');
  const queueFlags = [...new Set(nodes.flatMap((n) => n.queueFlags))].join(' ');
  return `# ${name} completion for bash. Load it in this shell with
#   source <(${name} completion bash)
# or for every shell: add that line to ~/.bashrc.
${fn}_node() {
  children='' flags='' valued='' choices='' queuearg=0
  case "$1" in
${cases}
  esac
}

# The values of a flag that takes one of a few words ("$node $flag").
${fn}_values() {
  values=''
  case "$1" in
${valueCases}
  esac
}

# The queue names on the server the words typed name (nothing when it cannot be asked).
${fn}_queues() {
  compopt +o default 2>/dev/null # no file names in their place
  ${name} "\${conn[@]}" completion bash --queues 2>/dev/null
}

${fn}() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" node='' word i expect=0 flag='' children flags valued choices values queuearg npos=0
  local -a conn=()
  ${fn}_node ''
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    if ((expect)); then
      expect=0
      case "$flag" in ${CONNECTION_VALUED.join('|')}) conn+=("$flag" "$word") ;; esac
      continue
    fi
    case "$word" in
      --*=*) case "\${word%%=*}" in ${CONNECTION_VALUED.join('|')}) conn+=("$word") ;; esac; continue ;;
      ${CONNECTION_BARE.join('|')}) conn+=("$word"); continue ;;
      -*) [[ " $valued " == *" $word "* ]] && expect=1 && flag="$word"; continue ;;
    esac
    if [[ " $children " == *" $word "* ]]; then
      node="\${node:+$node }$word"
      ${fn}_node "$node"
      npos=0
    else
      npos=$((npos + 1))
    fi
  done
  COMPREPLY=()
  if ((expect)); then
    # the value of a flag: one of its few words, a queue name, else the shell's own completion (file names)
    ${fn}_values "\${node:+$node }$flag"
    if [[ -n "$values" ]]; then
      COMPREPLY=($(compgen -W "$values" -- "$cur"))
    elif [[ " ${queueFlags} " == *" $flag "* ]]; then
      COMPREPLY=($(compgen -W "$(${fn}_queues)" -- "$cur"))
    fi
    return 0
  fi
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  elif [[ -n "$children" ]]; then
    COMPREPLY=($(compgen -W "$children" -- "$cur"))
  elif [[ -n "$choices" ]]; then
    COMPREPLY=($(compgen -W "$choices" -- "$cur"))
  elif ((queuearg && npos == 0)); then
    COMPREPLY=($(compgen -W "$(${fn}_queues)" -- "$cur"))
  fi
}
complete -o default -F ${fn} ${name}
`;
}

function zshScript(name: string, nodes: CompletionNode[]): string {
  const fn = `_${name.replace(/\W/g, '_')}`;
  const described = (entries: Entry[]) => entries.map((e) => quote(`${e.name.replace(/:/g, '\\:')}:${e.description}`)).join(' ');
  const cases = nodes
    .map(
      (n) =>
        `    ${quote(n.path)})\n` +
        `      children=(${described(n.children)})\n` +
        `      flags=(${described(n.flags)})\n` +
        `      valued=(${n.valued.map((v) => quote(v)).join(' ')}); choices=(${n.choices.map((c) => quote(c)).join(' ')}); queuearg=${n.queueArg ? 1 : 0} ;;`,
    )
    .join('\n');
  const valueCases = nodes
    .flatMap((n) => Object.entries(n.values).map(([flag, values]) => `    ${quote(`${n.path ? `${n.path} ` : ''}${flag}`)}) values=(${values.map((v) => quote(v)).join(' ')}) ;;`))
    .join('\n');
  const queueFlags = [...new Set(nodes.flatMap((n) => n.queueFlags))].map((f) => quote(f)).join(' ');
  return `#compdef ${name}
# ${name} completion for zsh (after compinit). Load it in this shell with
#   source <(${name} completion zsh)
# or for every shell: add that line to ~/.zshrc.
${fn}_node() {
  children=() flags=() valued=() choices=() queuearg=0
  case "$1" in
${cases}
  esac
}

# The values of a flag that takes one of a few words ("$node $flag").
${fn}_values() {
  values=()
  case "$1" in
${valueCases}
  esac
}

# The queue names on the server the words typed name (nothing when it cannot be asked).
${fn}_queues() {
  values=(\${(f)"$(${name} "\${conn[@]}" completion zsh --queues 2>/dev/null)"})
  compadd -a values
}

${fn}() {
  local -a children flags valued choices commands values conn
  local -a queueflags=(${queueFlags})
  local node='' word flag=''
  local -i i expect=0 queuearg=0 npos=0
  ${fn}_node ''
  for ((i = 2; i < CURRENT; i++)); do
    word=\${words[i]}
    if ((expect)); then
      expect=0
      case $flag in (${CONNECTION_VALUED.join('|')}) conn+=($flag $word) ;; esac
      continue
    fi
    case $word in
      --*=*) case \${word%%=*} in (${CONNECTION_VALUED.join('|')}) conn+=($word) ;; esac; continue ;;
      ${CONNECTION_BARE.join('|')}) conn+=($word); continue ;;
      -*) (( \${valued[(Ie)$word]} )) && expect=1 && flag=$word; continue ;;
    esac
    commands=(\${children%%:*})
    if (( \${commands[(Ie)$word]} )); then
      node=\${node:+$node }$word
      ${fn}_node "$node"
      npos=0
    else
      npos=$((npos + 1))
    fi
  done
  if ((expect)); then
    ${fn}_values "\${node:+$node }$flag"
    if (( \${#values} )); then compadd -a values
    elif (( \${queueflags[(Ie)$flag]} )); then ${fn}_queues
    else _files; fi
    return
  fi
  if [[ $PREFIX == -* ]]; then _describe -t options option flags; return; fi
  if (( \${#children} )); then _describe -t commands command children; return; fi
  if (( \${#choices} )); then compadd -a choices; return; fi
  if (( queuearg && npos == 0 )); then ${fn}_queues; return; fi
  _files
}

compdef ${fn} ${name}
`;
}

function fishScript(name: string, nodes: CompletionNode[]): string {
  const fn = `__${name.replace(/\W/g, '_')}`;
  const q = (t: string) => quote(t, true);
  const listCases = (pick: (n: CompletionNode) => string[]) =>
    nodes
      .filter((n) => pick(n).length > 0)
      .map((n) => `    case ${q(n.path)}\n      printf '%s\\n' ${pick(n).map(q).join(' ')}`)
      .join('\n');
  const lines: string[] = [];
  for (const n of nodes) {
    const at = `-n ${q(`${fn}_at ${q(n.path)}`)}`;
    for (const c of n.children) lines.push(`complete -c ${name} ${at} -f -a ${q(c.name)} -d ${q(c.description)}`);
    if (n.choices.length) lines.push(`complete -c ${name} ${at} -f -a ${q(n.choices.join(' '))}`);
    if (n.queueArg) lines.push(`complete -c ${name} -n ${q(`${fn}_at ${q(n.path)}; and test (${fn}_positionals) = 0`)} -f -a ${q(`(${fn}_queues)`)}`);
    for (const o of n.options) {
      const values = n.values[o.long ?? o.short ?? ''];
      const queue = n.queueFlags.includes(o.long ?? '');
      const parts = [
        o.long ? `-l ${q(o.long.replace(/^--/, ''))}` : '',
        o.short ? `-s ${q(o.short.replace(/^-/, ''))}` : '',
        values ? `-x -a ${q(values.join(' '))}` : queue ? `-x -a ${q(`(${fn}_queues)`)}` : o.valued ? '-r' : '',
      ].filter(Boolean);
      lines.push(`complete -c ${name} ${at} ${parts.join(' ')} -d ${q(o.description)}`);
    }
  }
  return `# ${name} completion for fish. Load it in this shell with
#   ${name} completion fish | source
# or for every shell: ${name} completion fish > ~/.config/fish/completions/${name}.fish
function ${fn}_children
  switch $argv[1]
${listCases((n) => n.children.map((c) => c.name))}
  end
end

function ${fn}_valued
  switch $argv[1]
${listCases((n) => n.valued)}
  end
end

# The command being typed (e.g. "schedulers add") on the first line, and how many arguments
# follow it on the second: flags and their values are skipped.
function ${fn}_walk
  set -l node ''
  set -l count 0
  set -l expect 0
  set -l words (commandline -opc)
  set -e words[1]
  for word in $words
    if test $expect = 1
      set expect 0
      continue
    end
    switch $word
      case '--*=*'
        continue
      case '-*'
        if contains -- $word (${fn}_valued $node)
          set expect 1
        end
        continue
    end
    if contains -- $word (${fn}_children $node)
      set node (string trim -- "$node $word")
      set count 0
    else
      set count (math $count + 1)
    end
  end
  echo $node
  echo $count
end

function ${fn}_node
  set -l walk (${fn}_walk)
  echo $walk[1]
end

function ${fn}_at
  set -l node (${fn}_node)
  test "$node" = "$argv[1]"
end

# How many arguments follow the command being typed.
function ${fn}_positionals
  set -l walk (${fn}_walk)
  echo $walk[2]
end

# The queue names on the server the words typed name (nothing when it cannot be asked).
function ${fn}_queues
  set -l conn
  set -l expect ''
  set -l words (commandline -opc)
  set -e words[1]
  for word in $words
    if test -n "$expect"
      set -a conn $expect $word
      set expect ''
      continue
    end
    switch $word
      case ${CONNECTION_VALUED.map((f) => q(f)).join(' ')}
        set expect $word
      case ${CONNECTION_VALUED.filter((f) => f.startsWith('--')).map((f) => q(`${f}=*`)).join(' ')} ${CONNECTION_BARE.map((f) => q(f)).join(' ')}
        set -a conn $word
    end
  end
  ${name} $conn completion fish --queues 2>/dev/null
end

${lines.join('\n')}
`;
}
