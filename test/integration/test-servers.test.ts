/**
 * The harness's servers (test/helpers/valkey.ts) under the conditions that made the suite flaky:
 * a restarted cluster node "exited during start" because its port had been taken meanwhile.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { freePort, TestServer, waitFor } from '../helpers/valkey.js';

describe('test servers (harness)', function () {
  this.timeout(30000);

  it('ports come from below the kernel ephemeral range, never twice in one process', async () => {
    const [ephemeralLow] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    const ports = await Promise.all(Array.from({ length: 50 }, () => freePort()));
    expect(new Set(ports).size).to.equal(ports.length);
    if (ephemeralLow > 11000) for (const p of ports) expect(p).to.be.below(ephemeralLow);
  });

  it('a restart waits for its port when something else holds it for a moment, and comes back on the same port', async () => {
    const server = await new TestServer().start();
    try {
      const port = server.port;
      await server.kill();
      // what a client's retry bound to that port would do: hold it, then let go
      const squatter = createServer((socket) => socket.destroy());
      await new Promise<void>((resolve) => squatter.listen(port, '127.0.0.1', resolve));
      setTimeout(() => squatter.close(), 500);
      await server.start();
      expect(server.port).to.equal(port);
      const c = server.client();
      try {
        expect(await c.ping()).to.equal('PONG');
      } finally {
        c.disconnect();
      }
    } finally {
      await server.stop();
    }
  });

  it("a client it handed out is quiet once the server is stopped under it (no '[ioredis] Unhandled error event')", async () => {
    const server = await new TestServer().start();
    const c = server.client();
    try {
      await c.ping();
      expect(c.listenerCount('error'), 'before the stop the test sees errors as ioredis reports them').to.equal(0);
      await server.stop();
      expect(c.listenerCount('error')).to.be.above(0);
      // and it stops knocking on the stopped server's port; a later quit() still answers
      await waitFor(() => c.status === 'end', 'the client to give up once its server is gone');
      expect(await c.quit()).to.equal('OK');
    } finally {
      c.disconnect();
    }
  });
});
