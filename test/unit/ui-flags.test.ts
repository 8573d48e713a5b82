/** `glidemq ui`'s flags: which hosts count as loopback (no credentials needed there) and how --auth splits. */
import { expect } from 'chai';
import { isLoopback, parseBasicAuth } from '../../src/cli/commands/ui.js';

describe('glidemq ui: --host and --auth', () => {
  it('loopback is 127.0.0.0/8, ::1 and localhost; anything else needs credentials', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', 'localhost', 'LOCALHOST', '::1', '[::1]']) expect(isLoopback(host), host).to.equal(true);
    for (const host of ['0.0.0.0', '::', '10.0.0.5', '192.168.1.2', 'example.com', '127.0.0.1.example.com']) expect(isLoopback(host), host).to.equal(false);
  });

  it('user:pass splits at the first colon; no colon or no user is refused', () => {
    expect(parseBasicAuth('ops:s3cret')).to.deep.equal({ user: 'ops', pass: 's3cret' });
    expect(parseBasicAuth('ops:a:b:c')).to.deep.equal({ user: 'ops', pass: 'a:b:c' });
    expect(parseBasicAuth('ops:')).to.deep.equal({ user: 'ops', pass: '' });
    expect(parseBasicAuth('ops')).to.equal(undefined);
    expect(parseBasicAuth(':pass')).to.equal(undefined);
  });
});
