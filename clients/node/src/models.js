// How answers are read: every time field becomes a Date, and a time the
// client cannot read is an error of that field only, never of the answer.

// RFC 3339 as leaseapi writes it, and with any offset and precision.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * Reads an RFC 3339 time (`2026-11-30T07:00:00.000Z`) as a Date; throws a
 * TypeError naming the text when it is not one (a Date has millisecond
 * precision: finer digits are dropped).
 */
export function parseTime(text) {
  if (typeof text !== 'string') {
    throw new TypeError(`${JSON.stringify(text)} is not an RFC 3339 time (not a string)`);
  }
  const m = RFC3339.exec(text);
  if (m === null) {
    throw new TypeError(`${JSON.stringify(text)} is not an RFC 3339 time`);
  }
  const [, year, month, day, hour, minute, second] = m.map(Number);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 59) {
    throw new TypeError(`${JSON.stringify(text)} is not an RFC 3339 time (a field out of range)`);
  }
  // Date.parse reads years 0000-9999 with any offset; fractions beyond
  // milliseconds are cut first, since it refuses more than three digits.
  const frac = m[7] === undefined ? '' : m[7].slice(0, 4);
  const zone = m[8] === 'z' ? 'Z' : m[8];
  const ms = Date.parse(`${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}${frac}${zone}`);
  if (Number.isNaN(ms) || new Date(Date.UTC(year, month - 1, day)).getUTCDate() !== day) {
    throw new TypeError(`${JSON.stringify(text)} is not a time this client can represent`);
  }
  return new Date(ms);
}

/** Writes a Date as RFC 3339 in UTC with milliseconds, leaseapi's format. */
export function formatTime(date) {
  if (!(date instanceof Date) || Number.isNaN(date.getTime())) {
    throw new TypeError(`${String(date)} is not a valid Date`);
  }
  return date.toISOString();
}

// The time fields of each schema of api/openapi.yaml that the client reads,
// and the fields holding other schemas (an object, or [name] for a list).
// A test compares this table with the spec, so a new time field cannot be
// left a string.
export const SCHEMAS = {
  Lease: { times: ['acquiredAt', 'renewedAt', 'expiresAt', 'releasedAt', 'tick', 'lastCompletedTick', 'nextTick', 'pausedAt', 'owedTick'] },
  LeaseList: { times: ['serverTime'], nested: { leases: ['Lease'] } },
  Run: { times: ['tick', 'startedAt', 'endedAt'] },
  RunList: { times: [], nested: { runs: ['Run'] } },
  RecentRunList: { times: ['serverTime'], nested: { runs: ['Run'] } },
  Stats: { times: ['serverTime'] },
  Owed: { times: ['tick'] },
  OwedList: { times: [], nested: { owed: ['Owed'] } },
  Problem: { times: ['now'], nested: { lease: 'Lease', group: 'Group' } },
  Group: { times: ['createdAt'], nested: { holders: ['GroupHolder'] } },
  GroupHolder: { times: ['expiresAt'] },
  GroupList: { times: [], nested: { groups: ['Group'] } },
  Whoami: { times: [] },
  Status: { times: [] },
  Health: { times: [] },
  Credential: { times: ['createdAt'] },
  CreatedCredential: { times: ['createdAt'] },
  CredentialList: { times: [], nested: { credentials: ['Credential'] } },
  WebhookDelivery: { times: ['at'] },
  WebhookDeliveryList: { times: [], nested: { deliveries: ['WebhookDelivery'] } },
  Webhook: { times: ['createdAt'], nested: { lastDelivery: 'WebhookDelivery' } },
  CreatedWebhook: { times: ['createdAt'], nested: { lastDelivery: 'WebhookDelivery' } },
  WebhookList: { times: [], nested: { webhooks: ['Webhook'] } },
  JobPolicy: { times: ['statusSince', 'lastAlertAt', 'updatedAt'], nested: { failureRate: 'FailureRate' } },
  FailureRate: { times: [] },
};

/**
 * Reads a JSON object of the schema `name`: a copy whose time fields are
 * Dates (null when absent or null), whose nested objects are read the same
 * way, with `fieldErrors` ({field: why}) naming each time it could not read
 * (that field is null, the rest of the object and of its list is intact)
 * and `raw` the JSON as received. Throws a TypeError when `data` is not an
 * object at all.
 */
export function decode(name, data) {
  const schema = SCHEMAS[name];
  if (schema === undefined) {
    throw new Error(`no schema ${name} in the client's table`);
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    throw new TypeError(`a ${name} must be a JSON object, not ${JSON.stringify(data)?.slice(0, 80)}`);
  }
  const out = { ...data };
  const fieldErrors = {};
  for (const field of schema.times) {
    const value = data[field];
    if (value === undefined || value === null) {
      out[field] = value ?? null;
      continue;
    }
    try {
      out[field] = parseTime(value);
    } catch (err) {
      out[field] = null;
      fieldErrors[field] = err.message;
    }
  }
  for (const [field, kind] of Object.entries(schema.nested ?? {})) {
    const value = data[field];
    if (value === undefined || value === null) {
      continue;
    }
    if (Array.isArray(kind)) {
      if (!Array.isArray(value)) {
        throw new TypeError(`${name}.${field} must be a list`);
      }
      out[field] = value.map((item) => decode(kind[0], item));
    } else {
      out[field] = decode(kind, value);
    }
  }
  Object.defineProperty(out, 'fieldErrors', { value: fieldErrors, enumerable: false });
  Object.defineProperty(out, 'raw', { value: data, enumerable: false });
  return out;
}
