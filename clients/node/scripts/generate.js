// Writes src/schema.d.ts from api/openapi.yaml with the pinned
// openapi-typescript, as its command line would (same header, same
// options), and one addition: a string that lists its values under
// `x-extensible-enum` (a set a later leaseapi may extend: a problem's
// `code`, a webhook event type, ...) becomes the union of those values and
// any other string, `"lease_held" | ... | (string & {})`. An editor still
// offers the values this version knows, and a value it does not know is
// still a string; openapi-typescript alone would make it a bare `string`.
//
//   node scripts/generate.js [SPEC [OUT]]   (defaults: ../../api/openapi.yaml, src/schema.d.ts)

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import openapiTS, { astToString, COMMENT_HEADER, NULL, STRING, tsLiteral, tsUnion } from 'openapi-typescript';
import ts from 'typescript';

const PACKAGE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The type of a schema with an x-extensible-enum; undefined for any other schema. */
export function extensibleEnum(schema) {
  const known = schema?.['x-extensible-enum'];
  if (!Array.isArray(known)) {
    return undefined;
  }
  const members = known.filter((v) => v !== null).map(tsLiteral);
  members.push(ts.factory.createParenthesizedType(ts.factory.createIntersectionTypeNode([STRING, ts.factory.createTypeLiteralNode([])])));
  if (schema.nullable || known.includes(null)) {
    members.push(NULL);
  }
  return tsUnion(members);
}

/** The text of src/schema.d.ts for the spec at `spec` (a path). */
export async function generate(spec) {
  const ast = await openapiTS(pathToFileURL(path.resolve(spec)), { transform: extensibleEnum, silent: true });
  return `${COMMENT_HEADER}${astToString(ast)}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const spec = process.argv[2] ?? path.join(PACKAGE, '..', '..', 'api', 'openapi.yaml');
  const out = process.argv[3] ?? path.join(PACKAGE, 'src', 'schema.d.ts');
  writeFileSync(out, await generate(spec), 'utf8');
}
