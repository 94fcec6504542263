// The client against api/openapi.yaml without a server: the generated types
// are current, every operation has its method, every time field is read.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { Client, SCHEMAS } from '../src/index.js';
import { generate } from '../scripts/generate.js';
import { PACKAGE, REPO } from './harness.js';
import { Spec } from './spec.js';

const spec = new Spec(path.join(REPO, 'api', 'openapi.yaml'));

test('src/schema.d.ts is what the pinned generator makes of api/openapi.yaml (run make generate)', async () => {
  const got = await generate(path.join(REPO, 'api', 'openapi.yaml'));
  assert.equal(got, readFileSync(path.join(PACKAGE, 'src', 'schema.d.ts'), 'utf8'), 'src/schema.d.ts is stale: run make generate');
});

test('every operation of the spec is a method of Client, or named as no API call', () => {
  const ids = spec.operationIds().sort();
  const known = [...Object.keys(Client.OPERATIONS), ...Object.keys(Client.NOT_CALLS)].sort();
  assert.deepEqual(known, ids, 'Client.OPERATIONS and Client.NOT_CALLS must name exactly the operationIds of api/openapi.yaml');
  for (const [id, method] of Object.entries(Client.OPERATIONS)) {
    assert.equal(typeof Client.prototype[method], 'function', `operation ${id}: Client has no method ${method}`);
  }
});

test('the client reads every time field of every schema it reads, and every nested schema', () => {
  const shapes = spec.shapes();
  for (const [name, mine] of Object.entries(SCHEMAS)) {
    const theirs = shapes[name];
    assert.ok(theirs, `the client reads schema ${name}, which the spec lacks`);
    assert.deepEqual([...mine.times].sort(), [...theirs.times].sort(), `time fields of ${name}`);
    assert.deepEqual(mine.nested ?? {}, theirs.nested, `nested schemas of ${name}`);
    for (const kind of Object.values(theirs.nested)) {
      const child = Array.isArray(kind) ? kind[0] : kind;
      assert.ok(SCHEMAS[child], `${name} holds ${child}, which the client does not read`);
    }
  }
});

test('the declarations type-check against the generated schema', () => {
  execFileSync(path.join(PACKAGE, 'node_modules', '.bin', 'tsc'), ['-p', path.join(PACKAGE, 'test', 'types')], { cwd: PACKAGE, stdio: 'pipe', timeout: 120_000 });
});
