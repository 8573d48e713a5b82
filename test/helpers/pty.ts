/**
 * Runs a command in a pseudo-terminal (through python3's pty module, since Node has none built in),
 * types `answer` once `prompt` appears on its output, and collects the output and exit code. For
 * testing the TTY-only paths of the CLI, such as confirmation questions.
 */
import { spawn } from 'node:child_process';

const DRIVER = `
import os, pty, select, sys, time
prompt, answer, argv = sys.argv[1].encode(), sys.argv[2].encode(), sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(argv[0], argv)
out, sent, deadline = b'', False, time.time() + 20
while time.time() < deadline:
    ready, _, _ = select.select([fd], [], [], 0.1)
    if fd in ready:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
        if not sent and prompt in out:
            os.write(fd, answer)
            sent = True
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128)
`;

export interface PtyResult {
  code: number | null;
  /** Everything the command wrote to the terminal (stdout and stderr together). */
  output: string;
}

export function runInPty(argv: string[], prompt: string, answer: string, env: Record<string, string | undefined> = {}): Promise<PtyResult> {
  return new Promise((resolve, reject) => {
    const child = spawn('python3', ['-c', DRIVER, prompt, answer, ...argv], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}
