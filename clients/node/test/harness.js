// The server under test: leaseapi built from this repository (or
// LEASEAPI_BIN), on a Postgres database made for this test file, on a
// loopback port; and the recorder that checks every answer the clients read
// against the closed form of api/openapi.yaml (closedSpec).

import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

import { after, before } from 'node:test';

import { Client } from '../src/index.js';
import { closedSpec } from './spec.js';

export const PACKAGE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const REPO = path.resolve(PACKAGE, '..', '..');
export const LEASE_TOKEN = 'node-lease-token-0123456789abcdef';
export const ADMIN_TOKEN = 'node-admin-token-0123456789abcdef';
// The repo/repotest harness of the Go tests looks for Postgres the same way.
const LOCAL_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable';
// Bounds every wait for a process to come up or go away.
export const START_TIMEOUT_MS = 60_000;
// The longest a server of a test may live: it stops by itself even when the
// test process is killed.
const SERVER_LIFETIME_S = 600;

/** A directory of its own for a test file, removed at exit. */
export function tempDir(prefix) {
  const dir = mkdtempSync(path.join(os.tmpdir(), `leaseapi-node-${prefix}-`));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Polls ready() until it is true, for at most timeoutMs; throws naming `what` otherwise. */
export async function waitUntil(what, ready, timeoutMs, intervalMs = 50) {
  const deadline = performance.now() + timeoutMs;
  while (!(await ready())) {
    if (performance.now() > deadline) {
      throw new Error(`${what}: not after ${timeoutMs} ms`);
    }
    await sleep(intervalMs);
  }
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function binary(dir) {
  if (process.env.LEASEAPI_BIN) {
    return process.env.LEASEAPI_BIN;
  }
  const out = path.join(dir, 'leaseapi');
  execFileSync('go', ['build', '-o', out, './cmd/leaseapi'], { cwd: REPO, stdio: 'inherit', timeout: 300_000 });
  return out;
}

function psql(server, sql) {
  // Notices (a database that does not exist yet) are not errors.
  execFileSync('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', server, '-c', sql], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, PGOPTIONS: '--client-min-messages=warning' },
    timeout: 60_000,
  });
}

/** A fresh database for this test file, dropped at exit. */
export function database(name) {
  const server = process.env.LEASEAPI_TEST_DATABASE_URL || LOCAL_DATABASE_URL;
  const db = `leaseapi_node_${name}_${process.pid}`;
  psql(server, `DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
  psql(server, `CREATE DATABASE ${db}`);
  process.on('exit', () => {
    try {
      psql(server, `DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    } catch {
      // Leaving a database behind does not fail the run.
    }
  });
  const url = new URL(server);
  url.pathname = `/${db}`;
  return url.href;
}

/**
 * Starts leaseapi on a loopback port with a lease and an admin token, and
 * waits until it is ready. `env` adds to its environment (TLS files...).
 * Resolves to {url, port, stop(), log(), freeze(), thaw()}; stop() throws
 * unless leaseapi exits 0 on SIGTERM.
 */
export async function startServer({ name, dir, databaseUrl, env = {}, scheme = 'http', ca } = {}) {
  const port = await freePort();
  const logPath = path.join(dir, `leaseapi-${name}.log`);
  const bin = binary(dir);
  const { openSync } = await import('node:fs');
  const logFd = openSync(logPath, 'w');
  // timeout(1) ends the server after SERVER_LIFETIME_S even if this process
  // dies. --foreground: a SIGTERM reaches leaseapi once (not again through
  // the process group, which could kill it in the middle of its graceful
  // shutdown); --preserve-status: its exit status is leaseapi's.
  const proc = spawn('timeout', ['--foreground', '--preserve-status', '-k', '20', String(SERVER_LIFETIME_S), bin], {
    env: {
      ...process.env,
      LEASEAPI_ADDR: `127.0.0.1:${port}`,
      LEASEAPI_DATABASE_URL: databaseUrl,
      LEASEAPI_LOG_LEVEL: 'warn',
      LEASEAPI_MIN_TTL: '1s',
      LEASEAPI_REQUEST_TIMEOUT: '2s',
      LEASEAPI_MISSED_SWEEP: '1s',
      LEASEAPI_API_TOKENS: LEASE_TOKEN,
      LEASEAPI_ADMIN_TOKENS: ADMIN_TOKEN,
      ...env,
    },
    stdio: ['ignore', logFd, logFd],
  });
  let exited = null;
  proc.on('exit', (code, signal) => {
    exited = { code, signal };
  });
  const url = `${scheme}://127.0.0.1:${port}`;
  const log = () => readFileSync(logPath, 'utf8').split('\n').slice(-40).join('\n');
  const { Client } = await import('../src/index.js');
  const probe = new Client(url, { ca, retryForMs: 0, timeoutMs: 2000, logger: quietLogger() });
  await waitUntil(
    'leaseapi ready',
    async () => {
      if (exited !== null) {
        throw new Error(`leaseapi exited before it was ready (${JSON.stringify(exited)})\n${log()}`);
      }
      try {
        await probe.readyz();
        return true;
      } catch {
        return false;
      }
    },
    START_TIMEOUT_MS,
  );
  probe.close();
  // SIGTERM, and the graceful shutdown must end with exit status 0.
  const stop = async () => {
    if (exited === null) {
      proc.kill('SIGTERM');
      await waitUntil('leaseapi stopped', () => exited !== null, 30_000).catch(() => proc.kill('SIGKILL'));
    }
    if (exited?.code !== 0) {
      throw new Error(`leaseapi did not exit 0 on SIGTERM: ${JSON.stringify(exited)}\n${log()}`);
    }
  };
  process.on('exit', () => {
    if (exited === null) {
      proc.kill('SIGKILL');
    }
  });
  // SIGSTOP and SIGCONT to leaseapi itself (the child of timeout(1)): a
  // server that stops answering, as a long pause or a partition makes it.
  const signalServer = (sig) => {
    const children = readFileSync(`/proc/${proc.pid}/task/${proc.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    if (children.length !== 1) {
      throw new Error(`timeout(1) has ${children.length} children, not leaseapi alone`);
    }
    process.kill(Number(children[0]), sig);
  };
  return { url, stop, log, port, freeze: () => signalServer('SIGSTOP'), thaw: () => signalServer('SIGCONT') };
}

/** A logger that keeps its lines in `lines` (for assertions) and prints nothing. */
export function quietLogger(lines = []) {
  const at = (level) => (msg, attrs = {}) => lines.push({ level, msg, ...attrs });
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), lines };
}


/**
 * Collects the exchanges of a test's clients (this process's, and the JSON
 * lines files its child processes wrote into `dir`) and checks each against
 * the spec: check() throws listing the first that break it.
 */
export class Recorder {
  constructor(dir) {
    this.dir = dir;
    this.exchanges = [];
    this.onExchange = (e) => this.exchanges.push(e);
  }

  all() {
    const found = [...this.exchanges];
    for (const f of readdirSync(this.dir).filter((n) => n.startsWith('exchanges-') && n.endsWith('.jsonl')).sort()) {
      const text = readFileSync(path.join(this.dir, f), 'utf8');
      // A line without its newline was cut by a SIGKILL.
      const lines = text.split('\n').slice(0, -1);
      found.push(...lines.map((l) => JSON.parse(l)));
    }
    return found;
  }

  check() {
    const all = this.all();
    if (all.length === 0) {
      throw new Error('the clients recorded no exchange');
    }
    const spec = closedSpec(REPO);
    const problems = all.flatMap((e) => spec.check(e));
    if (problems.length > 0) {
      throw new Error(`${problems.length} of ${all.length} exchanges break api/openapi.yaml:\n${problems.slice(0, 20).join('\n')}`);
    }
    return all.length;
  }
}

/**
 * The bundle of a test file that needs one server: registers the hooks that
 * start leaseapi on a fresh database before the file's tests (with a lease
 * `client` and an `admin` client whose exchanges `recorder` keeps) and, after
 * them, close the clients, stop the server (exit 0) and check every
 * exchange against the spec. `options` go to startServer.
 */
export function useServer(name, options = {}) {
  const dir = tempDir(name);
  const b = { dir, recorder: new Recorder(dir) };
  before(async () => {
    b.server = await startServer({ name, dir, databaseUrl: database(name), ...options });
    const { Client } = await import('../src/index.js');
    const client = (token) => new Client(b.server.url, { token, ca: options.ca, retryForMs: 10_000, onExchange: b.recorder.onExchange, logger: quietLogger() });
    b.client = client(LEASE_TOKEN);
    b.admin = client(ADMIN_TOKEN);
  });
  after(async () => {
    b.client?.close();
    b.admin?.close();
    await b.server?.stop();
    // Every answer any client of the file read is as the spec says.
    b.recorder.check();
  });
  return b;
}

/**
 * Runs fn(client, requests) with a client of a server on a loopback port
 * that gives `answers` ([status, body, headers], in order) and records each
 * request with the time it came at.
 */
export async function scripted(answers, fn) {
  const requests = [];
  const srv = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      requests.push({ method: req.method, path: req.url, body: raw === '' ? undefined : JSON.parse(raw), at: performance.now() });
      const [status, body, headers = {}] = answers.shift() ?? [500, { code: 'internal' }];
      const payload = body === undefined ? '' : JSON.stringify(body);
      res.writeHead(status, { ...(body === undefined ? {} : { 'Content-Type': status < 400 ? 'application/json' : 'application/problem+json' }), ...headers });
      res.end(payload);
    });
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const client = new Client(`http://127.0.0.1:${srv.address().port}`, { retryForMs: 5000, logger: quietLogger() });
  try {
    return await fn(client, requests);
  } finally {
    client.close();
    srv.closeAllConnections();
    await new Promise((resolve) => srv.close(resolve));
  }
}
