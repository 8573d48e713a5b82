import { expect } from 'chai';
import { Redis } from 'ioredis';
import { LibraryVersionError } from '../../src/engine/shared/errors.js';
import { ensureLibrary, LIBRARY_CODE, LIBRARY_VERSION, serverLibrary } from '../../src/engine/connecting/library.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { useServer } from '../helpers/valkey.js';

describe('function library loading', () => {
  const server = useServer();
  let admin: Redis;
  beforeEach(async () => {
    admin = new Redis(server().port, '127.0.0.1');
    await admin.call('FUNCTION', 'FLUSH', 'SYNC');
  });
  afterEach(() => admin.quit());

  it('loads the library once, concurrently from many clients, with the source hash as its version', async () => {
    const clients = Array.from({ length: 5 }, () => new Redis(server().port, '127.0.0.1'));
    await Promise.all(clients.map((c) => ensureLibrary(c)));
    expect(await serverLibrary(admin)).to.deep.include({ version: LIBRARY_VERSION });
    await Promise.all(clients.map((c) => c.quit()));
  });

  it('replaces an older library', async () => {
    const older = LIBRARY_CODE.replace(/"package":"[^"]+"/, '"package":"0.0.1"').replace(/"version":"[0-9a-f]+"/, '"version":"0000000000000000"');
    await admin.call('FUNCTION', 'LOAD', older);
    const q = new Queue('lib-old', { connection: server().url });
    await q.add('a', {});
    expect((await serverLibrary(admin))?.version).to.equal(LIBRARY_VERSION);
    await q.close();
  });

  it('an older client never replaces a newer library: it refuses with a clear error', async () => {
    const newer = LIBRARY_CODE.replace(/"package":"[^"]+"/, '"package":"99.0.0"').replace(/"version":"[0-9a-f]+"/, '"version":"ffffffffffffffff"');
    await admin.call('FUNCTION', 'LOAD', newer);
    const q = new Queue('lib-new', { connection: server().url });
    let err: unknown;
    try {
      await q.add('a', {});
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(LibraryVersionError);
    expect(String((err as Error).message)).to.match(/newer than this client .* upgrade this glidemq/);
    expect((await serverLibrary(admin))?.version).to.equal('ffffffffffffffff');
    await q.close();
  });
});
