/**
 * A function call with many arguments is sent as a Command built by glidemq (function-call.ts):
 * on the wire it must be byte for byte what ioredis's own fcall writes, and a client whose options
 * change the arguments (keyPrefix) or batch commands (auto-pipelining) keeps ioredis's path.
 */
import { expect } from 'chai';
import { Command } from 'ioredis';
import type { Client } from '../../src/engine/connecting/connection.js';
import { sendFunction } from '../../src/engine/connecting/function-call.js';

/** A client that records what it is asked to send, by sendCommand or by its own fcall. */
function fakeClient(options: Record<string, unknown> = {}) {
  const sent: { via: string; wire: string }[] = [];
  const viaIoredis = (name: string) => (...args: unknown[]) => {
    // what ioredis's generated fcall does: a Command of the arguments as given
    sent.push({ via: 'ioredis', wire: String(new Command(name, args as string[], { replyEncoding: 'utf8' }).toWritable(undefined as never)) });
    return Promise.resolve('ok');
  };
  const client = {
    options,
    sendCommand: (command: Command) => {
      sent.push({ via: 'direct', wire: String(command.toWritable(undefined as never)) });
      return command.promise;
    },
    fcall: viaIoredis('fcall'),
    fcall_ro: viaIoredis('fcall_ro'),
  } as unknown as Client;
  return { client, sent };
}

/** Arguments of every kind a call passes: text, whole, negative, fractional and huge numbers. */
function manyArgs(): (string | number)[] {
  const args: (string | number)[] = ['me', 40, 0, '1', ''];
  for (let i = 0; i < 10; i++) args.push(String(i), `${i + 1}`, 'completed', 'null', -1, 'count:5', i * 1.5, 1e17, 'é ✓');
  return args;
}

describe('function calls on the wire (function-call.ts)', () => {
  it('a call with many arguments writes what ioredis fcall would, byte for byte, for FCALL and FCALL_RO', () => {
    for (const readOnly of [false, true]) {
      const direct = fakeClient();
      void sendFunction(direct.client, 'glidemq_finishMany', ['glide:{q}:meta'], manyArgs(), readOnly);
      const given = fakeClient({ keyPrefix: 'p:' });
      void sendFunction(given.client, 'glidemq_finishMany', ['glide:{q}:meta'], manyArgs(), readOnly);
      expect(direct.sent.map((s) => s.via)).to.deep.equal(['direct']);
      expect(given.sent.map((s) => s.via), 'a key prefix: ioredis applies it').to.deep.equal(['ioredis']);
      expect(direct.sent[0].wire).to.equal(given.sent[0].wire);
      expect(direct.sent[0].wire).to.match(readOnly ? /^\*\d+\r\n\$8\r\nfcall_ro\r\n/ : /^\*\d+\r\n\$5\r\nfcall\r\n/);
      expect(direct.sent[0].wire, 'a whole number beyond 2^53 in full digits').to.contain('\r\n100000000000000000\r\n');
    }
  });

  it('a short call, and any call on an auto-pipelining client, takes ioredis fcall', () => {
    const short = fakeClient();
    void sendFunction(short.client, 'glidemq_version', ['glide:{q}:meta'], ['a', 1], false);
    const piped = fakeClient({ enableAutoPipelining: true });
    void sendFunction(piped.client, 'glidemq_finishMany', ['glide:{q}:meta'], manyArgs(), false);
    expect([...short.sent, ...piped.sent].map((s) => s.via)).to.deep.equal(['ioredis', 'ioredis']);
  });
});
