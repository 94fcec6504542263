// api.js is the console's client of the leaseapi HTTP API: the same
// public endpoints every other client uses. It sends the token the user
// gave as a bearer token (never a cookie), reads RFC 9457 problems into
// APIError, and keeps the offset between the server's clock and the
// browser's, measured from each list's serverTime, so that times to
// expiry are computed against the server's clock.

const TOKEN_KEY = 'leaseapi.token';

/** APIError is a failed call: status 0 means no answer at all. */
export class APIError extends Error {
  constructor(status, code, detail, extra) {
    super(detail || code || `HTTP ${status}`);
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.extra = extra || {};
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// clock: server time minus browser time, in ms, from the newest answer
// that carried serverTime; null until one did.
let offset = null;
let offsetAt = 0;

/** serverNow is the server's clock as well as the browser can tell, in ms since the epoch. */
export function serverNow() {
  return Date.now() + (offset ?? 0);
}

/** clockKnown reports whether serverNow is based on an answer of the server. */
export function clockKnown() {
  return offset !== null;
}

function noteServerTime(serverTime, sentAt, receivedAt) {
  const t = Date.parse(serverTime);
  if (Number.isNaN(t)) return;
  // The server read its clock somewhere between send and receive: the
  // midpoint is the best guess, off by at most half the round trip.
  offset = t - (sentAt + receivedAt) / 2;
  offsetAt = receivedAt;
}

export function offsetInfo() {
  return { offset, at: offsetAt };
}

const TIMEOUT_MS = 10000;

/** call sends one request and returns the decoded JSON body, or throws APIError. */
export async function call(method, path, body, extraHeaders) {
  const headers = { Accept: 'application/json', ...(extraHeaders || {}) };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  const init = { method, headers, credentials: 'omit', cache: 'no-store', redirect: 'error' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
  init.signal = ctl.signal;
  const sentAt = Date.now();
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    const why = e.name === 'AbortError' ? `no answer within ${TIMEOUT_MS / 1000} s` : 'leaseapi could not be reached';
    throw new APIError(0, 'network', why);
  } finally {
    clearTimeout(timer);
  }
  const receivedAt = Date.now();
  const type = resp.headers.get('Content-Type') || '';
  let data = null;
  try {
    data = type.includes('json') ? await resp.json() : null;
  } catch {
    data = null;
  }
  if (!resp.ok) {
    const p = data || {};
    throw new APIError(resp.status, p.code || `http_${resp.status}`, p.detail || resp.statusText, {
      retryAfter: resp.headers.get('Retry-After'),
    });
  }
  if (data && typeof data.serverTime === 'string') noteServerTime(data.serverTime, sentAt, receivedAt);
  return data;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') q.set(k, v);
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

// A valid job id is sent as it is (every one of its characters may stand in
// a path, and the server reads the path unescaped); anything else is
// escaped, and the server answers it with a problem.
const job = (id) => `/leases/${/^[A-Za-z0-9._:-]+$/.test(id) ? id : encodeURIComponent(id)}`;

export const whoami = () => call('GET', '/whoami');
// health is /healthz: public, and it names the version that serves.
export const health = () => call('GET', '/healthz');
export const stats = () => call('GET', '/stats');
export const listLeases = (params) => call('GET', `/leases${query(params)}`);
export const getLease = (id) => call('GET', job(id));
export const listRuns = (id, limit = 100) => call('GET', `${job(id)}/runs${query({ limit })}`);
export const recentRuns = (params) => call('GET', `/runs${query(params)}`);
export const revoke = (id) => call('DELETE', job(id));
export const pause = (id, reason) => call('POST', `${job(id)}/pause`, reason ? { reason } : {});
export const resume = (id) => call('POST', `${job(id)}/resume`, {});
// repair undoes what ticks ahead of the server's clock did to the job.
export const repair = (id, reason) => call('POST', `${job(id)}/repair`, reason ? { reason } : {});
export const forgetSchedule = (id) => call('DELETE', `${job(id)}/schedule`);
// The job's alert policy and where it stands; 404 policy_not_found when it has none.
export const getPolicy = (id) => call('GET', `${job(id)}/policy`);
// trigger (run now) makes the job owe one manual tick. The key is the
// Idempotency-Key of this one confirmed action: sent again, it answers the
// same tick instead of owing a second run.
export const trigger = (id, reason, key) =>
  call('POST', `${job(id)}/trigger`, reason ? { reason } : {}, { 'Idempotency-Key': key });
export const cancelTrigger = (id) => call('DELETE', `${job(id)}/trigger`);
// The webhooks within the caller's scopes (admin): URLs redacted, never a
// secret. The console only lists them.
export const listWebhooks = () => call('GET', '/webhooks');
// The concurrency groups within the caller's scopes, with their holders.
export const listGroups = (params) => call('GET', `/groups${query(params)}`);
