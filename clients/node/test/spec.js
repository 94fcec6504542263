// api/openapi.yaml as the tests read it: the operations, the time fields of
// its schemas, and the check of an exchange (status, content type, body)
// against the operation's documented answers, with ajv.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import Ajv from 'ajv';
import { parse } from 'yaml';

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

export class Spec {
  constructor(file) {
    this.doc = parse(readFileSync(file, 'utf8'));
    // The whole document is one schema resource, so that every $ref of a
    // response schema resolves within it; OpenAPI's own keywords are
    // ignored (strict: false) and `nullable` is ajv's OpenAPI keyword.
    this.ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
    this.ajv.addSchema({ ...this.doc, $id: 'spec' });
    this.routes = Object.entries(this.doc.paths).map(([template, item]) => ({
      template,
      item,
      re: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
    }));
    this.validators = new Map();
  }

  /** Every operationId of the spec: its paths' and their callbacks'. */
  operationIds() {
    const ids = [];
    const walk = (paths) => {
      for (const item of Object.values(paths)) {
        for (const m of METHODS) {
          if (item[m]) {
            ids.push(item[m].operationId);
            for (const cb of Object.values(item[m].callbacks ?? {})) {
              walk(cb);
            }
          }
        }
      }
    };
    walk(this.doc.paths);
    return ids;
  }

  /** The fields of each component schema that hold a time (format date-time, or the Time schema), and those that hold another schema. */
  shapes() {
    const out = {};
    for (const [name, schema] of Object.entries(this.doc.components.schemas)) {
      const times = [];
      const nested = {};
      for (const [field, prop] of Object.entries(schema.properties ?? {})) {
        const ref = prop.$ref ?? prop.allOf?.[0]?.$ref;
        if (ref === '#/components/schemas/Time' || prop.format === 'date-time') {
          times.push(field);
        } else if (ref && this.#hasProperties(ref)) {
          nested[field] = ref.split('/').pop();
        } else if (prop.type === 'array' && prop.items?.$ref && this.#hasProperties(prop.items.$ref)) {
          nested[field] = [prop.items.$ref.split('/').pop()];
        }
      }
      out[name] = { times, nested };
    }
    return out;
  }

  #hasProperties(ref) {
    const schema = this.doc.components.schemas[ref.split('/').pop()];
    return schema?.properties !== undefined;
  }

  #deref(node) {
    while (node?.$ref) {
      node = node.$ref.slice(2).split('/').reduce((n, k) => n[k.replace(/~1/g, '/').replace(/~0/g, '~')], this.doc);
    }
    return node;
  }

  /** The problems of one exchange ({method, path, status, headers, body}); none when it is as documented. */
  check(e) {
    const what = `${e.method} ${e.path} -> ${e.status}`;
    const pathOnly = e.path.split('?')[0];
    const route = this.routes.find((r) => r.re.test(pathOnly));
    const op = route?.item[e.method.toLowerCase()];
    if (op === undefined) {
      return [`${what}: no such operation in the spec`];
    }
    const responses = op.responses;
    const key = String(e.status) in responses ? String(e.status) : 'default';
    const response = this.#deref(responses[key]);
    if (response === undefined) {
      return [`${what}: status not documented for ${op.operationId}`];
    }
    if (response.content === undefined) {
      return e.body === '' ? [] : [`${what}: a body where the spec documents none`];
    }
    const type = String(e.headers['content-type'] ?? '').split(';')[0].trim();
    if (!(type in response.content)) {
      return [`${what}: content type ${JSON.stringify(type)} not among ${Object.keys(response.content).join(', ')}`];
    }
    if (!type.endsWith('json')) {
      return [];
    }
    let body;
    try {
      body = JSON.parse(e.body);
    } catch (err) {
      return [`${what}: body is not JSON: ${err.message}`];
    }
    const validate = this.#validator(route.template, e.method.toLowerCase(), key, type, responses[key]);
    if (validate(body)) {
      return [];
    }
    return [`${what}: ${this.ajv.errorsText(validate.errors)} in ${e.body.slice(0, 300)}`];
  }

  #validator(template, method, status, type, responseNode) {
    const id = `${template} ${method} ${status} ${type}`;
    let v = this.validators.get(id);
    if (v === undefined) {
      // The pointer of the schema inside the document, through a response $ref.
      const esc = (s) => s.replace(/~/g, '~0').replace(/\//g, '~1');
      const base = responseNode.$ref ? responseNode.$ref.slice(1) : `/paths/${esc(template)}/${method}/responses/${status}`;
      v = this.ajv.compile({ $ref: `spec#${base}/content/${esc(type)}/schema` });
      this.validators.set(id, v);
    }
    return v;
  }
}

let closed;

/**
 * The closed form of the spec of the repository at `repo`, which the
 * server's answers are checked against: the published spec leaves answers
 * open to what later releases add, the closed form allows only what this
 * release sends (every response object closed, every x-extensible-enum an
 * enum). The Go tests derive it (api/internal/closedform); this runs their
 * command, once per process.
 */
export function closedSpec(repo) {
  if (closed === undefined) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'leaseapi-node-spec-'));
    try {
      const file = path.join(dir, 'openapi.closed.yaml');
      execFileSync('go', ['run', './api/internal/closespec', '-o', file], { cwd: repo, stdio: ['ignore', 'ignore', 'inherit'], timeout: 300_000 });
      closed = new Spec(file);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return closed;
}
