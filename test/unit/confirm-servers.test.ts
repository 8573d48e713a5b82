/**
 * Which servers' WAITAOF acknowledges a write before its fsync (producing/confirm.ts
 * waitaofAcksBeforeFsync: glidemq refuses confirm.fsync there), and reading a server's name and
 * version from INFO server.
 */
import { expect } from 'chai';
import { serverOf, waitaofAcksBeforeFsync } from '../../src/engine/producing/confirm.js';

describe('confirm.fsync: servers whose WAITAOF acknowledges before the fsync', () => {
  const cases: [string, string, string | undefined, boolean][] = [
    ['valkey', '8.0.1', 'everysec', true],
    ['valkey', '9.1.2', 'everysec', true],
    ['valkey', '8.0.1', 'always', false],
    ['valkey', '8.0.1', undefined, true],
    ['redis', '7.2.1', 'everysec', false],
    ['redis', '7.2.2', 'everysec', true],
    ['redis', '7.4.2', 'everysec', true],
    ['redis', '8.0.0', 'everysec', false],
    ['redis', '7.4.2', 'always', false],
  ];
  for (const [name, version, appendfsync, early] of cases) {
    it(`${name} ${version} with appendfsync ${appendfsync ?? 'unknown'}: ${early ? 'early' : 'holds'}`, () => {
      expect(waitaofAcksBeforeFsync({ name, version }, appendfsync)).to.equal(early);
    });
  }

  it('reads the name and version of a Valkey and of a Redis from INFO server', () => {
    expect(serverOf('# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n')).to.deep.equal({ name: 'valkey', version: '8.0.1' });
    expect(serverOf('# Server\r\nredis_version:7.4.2\r\nredis_mode:standalone\r\n')).to.deep.equal({ name: 'redis', version: '7.4.2' });
  });
});
