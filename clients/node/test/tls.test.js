// https with a private CA: leaseapi serves TLS with a certificate a CA made
// for the test signed (openssl); the client trusts the CA it is given and
// refuses a server it cannot verify.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { Client, Runner } from '../src/index.js';
import { LEASE_TOKEN, quietLogger, tempDir, useServer } from './harness.js';

/** A CA, and a certificate for 127.0.0.1 that it signed, in `dir`. */
function makeCertificates(dir) {
  const f = (name) => path.join(dir, name);
  const openssl = (...args) => execFileSync('openssl', args, { stdio: 'pipe', timeout: 60_000 });
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=leaseapi node test CA', '-keyout', f('ca.key'), '-out', f('ca.pem'));
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', f('server.key'), '-out', f('server.csr'));
  writeFileSync(f('san.ext'), 'subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n');
  openssl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-days', '1', '-extfile', f('san.ext'), '-out', f('server.pem'));
  return { ca: readFileSync(f('ca.pem')), cert: f('server.pem'), key: f('server.key') };
}

const certs = makeCertificates(tempDir('tls-certs'));
const b = useServer('tls', {
  scheme: 'https',
  ca: certs.ca,
  env: { LEASEAPI_TLS_CERT_FILE: certs.cert, LEASEAPI_TLS_KEY_FILE: certs.key },
});

test('a client given the private CA calls leaseapi over https, and a runner runs a job', async () => {
  const client = new Client(b.server.url, { token: LEASE_TOKEN, ca: certs.ca, onExchange: b.recorder.onExchange, logger: quietLogger() });
  assert.equal((await client.whoami()).role, 'lease');
  const id = `node-tls-${process.pid}`;
  const report = await new Runner(client, { owner: 'tls-replica', ttlMs: 3_000, logger: quietLogger() }).run(id, ({ token }) => token);
  assert.equal(report.result, 'succeeded');
  assert.equal((await client.get(id)).lastOutcome, 'succeeded');
  client.close();
});

test('a client without the CA refuses the server: connection_failed naming the certificate', async () => {
  const client = new Client(b.server.url, { token: LEASE_TOKEN, retryForMs: 0, logger: quietLogger() });
  await assert.rejects(client.whoami(), (err) => {
    assert.equal(err.code, 'connection_failed');
    assert.match(err.message, /certificate/i);
    return true;
  });
  assert.throws(() => new Client('http://127.0.0.1:1', { ca: certs.ca }), TypeError, 'a CA for plain http is a mistake');
});
