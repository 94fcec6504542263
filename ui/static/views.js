// views.js renders the views (overview, lease table, job, groups, webhooks) from the
// API's answers. Every view is an object with load() (fetch and render,
// throws APIError) and tick() (once a second: times to expiry). Data is
// only ever written as text. Jobs whose alert policy has them alerting come
// first in every table of leases, with their reasons.

import * as api from './api.js';
import { h, s, replace, fmtTime, fmtDuration, fmtCount } from './dom.js';

const STATES = ['held', 'released', 'expired', 'revoked'];
const OUTCOMES = ['succeeded', 'failed', 'expired', 'revoked', 'missed'];

/** jobHref is the console link of a job. */
export const jobHref = (id) => `#/jobs/${/^[A-Za-z0-9._:-]+$/.test(id) ? id : encodeURIComponent(id)}`;

/** badge shows a state or outcome as text; the colour only repeats it. */
function badge(kind, text) {
  return h('span', { class: `badge ${kind}-${text}` }, text);
}

/** untilText describes an instant relative to the server's clock. */
function untilText(iso) {
  if (!iso) return '—';
  const d = Date.parse(iso) - api.serverNow();
  return d >= 0 ? `in ${fmtDuration(d)}` : `${fmtDuration(-d)} ago`;
}

/** expiryCell is the time to expiry of a held lease, kept current by tickExpiries. */
function expiryCell(lease) {
  if (lease.state !== 'held') return h('td', { class: 'muted' }, '—');
  return h('td', { 'data-expires': lease.expiresAt, title: fmtTime(lease.expiresAt) }, expiryText(lease.expiresAt));
}

function expiryText(iso) {
  const d = Date.parse(iso) - api.serverNow();
  return d >= 0 ? `in ${fmtDuration(d)}` : `passed ${fmtDuration(-d)} ago (not yet re-read)`;
}

/** tickExpiries refreshes every countdown under root. */
export function tickExpiries(root) {
  for (const el of root.querySelectorAll('[data-expires]')) el.textContent = expiryText(el.dataset.expires);
  for (const el of root.querySelectorAll('[data-until]')) el.textContent = untilText(el.dataset.until);
}

function timeCell(iso) {
  return h('td', { class: 'time' }, iso ? h('time', { datetime: iso }, fmtTime(iso)) : '—');
}

/** alertingFlag shows that a job is alerting, with its reasons as text (none when it is not). */
function alertingFlag(lease) {
  if (!lease.alerting) return null;
  return [' ', h('span', { class: 'badge flag-alerting' }, 'alerting'), ' ',
    h('span', { class: 'reasons' }, (lease.alertReasons || []).join(', '))];
}

/** alertingFirst orders leases with the alerting ones first, each part in its own order. */
function alertingFirst(leases) {
  return [...leases.filter((l) => l.alerting), ...leases.filter((l) => !l.alerting)];
}

/** leaseTable is the table of a page of leases, the alerting ones first. */
export function leaseTable(leases, caption) {
  const alerting = leases.filter((l) => l.alerting).length;
  const rows = alertingFirst(leases).map((l) =>
    h('tr', { 'data-job': l.jobId, 'data-alerting': l.alerting ? 'true' : null },
      h('th', { scope: 'row' }, h('a', { href: jobHref(l.jobId), 'data-focus': `job:${l.jobId}` }, l.jobId)),
      h('td', null, badge('state', l.state), l.paused ? [' ', badge('flag', 'paused')] : null, alertingFlag(l),
        l.owedTick ? [' ', h('span', { class: 'badge flag-owed', title: `owes ${fmtTime(l.owedTick)} (${l.owedReason})` }, 'owed')] : null),
      h('td', { class: 'owner' }, l.owner),
      h('td', { class: 'num' }, String(l.token)),
      timeCell(l.tick),
      l.nextTick ? h('td', { class: 'time', 'data-until': l.nextTick, title: fmtTime(l.nextTick) }, untilText(l.nextTick)) : h('td', { class: 'muted' }, '—'),
      expiryCell(l),
      h('td', null, l.lastOutcome ? badge('outcome', l.lastOutcome) : h('span', { class: 'muted' }, 'none yet')),
    ));
  const first = `alerting job${alerting === 1 ? '' : 's'} first`;
  if (alerting) caption = caption ? `${caption}; ${first}` : `The ${first}`;
  return h('table', { class: 'leases' },
    caption ? h('caption', null, caption) : null,
    h('thead', null, h('tr', null,
      ['Job', 'State', 'Holder', 'Token', 'Tick', 'Next tick', 'Expires', 'Last outcome'].map((c) => h('th', { scope: 'col', class: c === 'Token' ? 'num' : null }, c)))),
    h('tbody', null, rows));
}

/** runsTable is the table of runs; withJob adds the job column (runs across jobs). */
function runsTable(runs, withJob, caption) {
  const cols = [withJob ? 'Job' : null, 'Outcome', 'Owner', 'Token', 'Tick', 'Started', 'Ended', 'Duration'].filter(Boolean);
  return h('table', { class: 'runs' },
    caption ? h('caption', null, caption) : null,
    h('thead', null, h('tr', null, cols.map((c) => h('th', { scope: 'col', class: c === 'Token' || c === 'Duration' ? 'num' : null }, c)))),
    h('tbody', null, runs.map((r) => h('tr', { 'data-outcome': r.outcome },
      withJob ? h('th', { scope: 'row' }, h('a', { href: jobHref(r.jobId) }, r.jobId)) : null,
      h('td', null, badge('outcome', r.outcome)),
      h('td', { class: 'owner' }, r.owner ?? '—'),
      h('td', { class: 'num' }, r.token ?? '—'),
      timeCell(r.tick),
      timeCell(r.startedAt),
      timeCell(r.endedAt),
      h('td', { class: 'num' }, r.outcome === 'running' ? 'running' : fmtDuration(r.durationMs)),
    ))));
}

/** empty is the empty state of a list. */
function empty(text) {
  return h('p', { class: 'empty' }, text);
}

function section(title, ...children) {
  const id = `sec-${title.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`;
  return h('section', { 'aria-labelledby': id }, h('h2', { id }, title), children);
}

/** statCard is one number with its label, linking to the leases it counts. */
function statCard(key, label, value, href, alarm) {
  const num = h('span', { class: 'num', 'data-stat': key }, fmtCount(value));
  return h('div', { class: `card${alarm && value > 0 ? ' alarm' : ''}` },
    h('dt', null, label),
    h('dd', null, href ? h('a', { href }, num) : num));
}

// ---- overview ---------------------------------------------------------

export function overview(ctx) {
  let root = null;
  return {
    title: 'Overview',
    async load() {
      const [st, runs, page, alerting] = await Promise.all([
        api.stats(),
        api.recentRuns({ outcome: 'failed,expired,missed', limit: 10 }),
        api.listLeases({ limit: 25 }),
        api.listLeases({ alerting: 'true', limit: 25 }),
      ]);
      root = h('div', null,
        h('h1', { tabindex: '-1' }, 'Overview'),
        section('Leases',
          h('dl', { class: 'cards' },
            STATES.map((k) => statCard(k, k, st.leases[k], `#/leases?state=${k}`, k === 'expired')),
            statCard('paused', 'paused', st.paused, '#/leases?paused=true'),
            statCard('overdue', 'overdue', st.overdue, '#/leases?overdue=true', true))),
        alerting.leases.length ? section('Alerting jobs',
          leaseTable(alerting.leases),
          alerting.nextCursor ? h('p', null, h('a', { href: '#/leases?alerting=true' }, 'Every alerting job →')) : null) : null,
        section('Runs finished in the last 24 h',
          h('dl', { class: 'cards' },
            OUTCOMES.map((k) => statCard(`runs-${k}`, k, st.runs24h[k], null, k !== 'succeeded' && k !== 'revoked')))),
        section('Newest failed, expired and missed runs',
          runs.runs.length ? runsTable(runs.runs, true) : empty('No failed, expired or missed runs are recorded.')),
        section('Leases, first page',
          page.leases.length ? leaseTable(page.leases) : empty('No leases yet: a lease appears when a replica first acquires its job.'),
          h('p', null, h('a', { href: '#/leases' }, page.nextCursor ? 'All leases, with filters and paging →' : 'Lease table with filters →'))),
      );
      ctx.render(root);
    },
    tick() {
      if (root) tickExpiries(root);
    },
  };
}

// ---- lease table ------------------------------------------------------

// The cursors of the pages before the current one, for "Previous": the API
// pages forward only (keyset), so the console remembers how it got here.
const paging = { key: null, stack: [] };

const FILTERS = ['state', 'owner', 'prefix', 'paused', 'overdue', 'alerting', 'limit'];

export function leases(ctx, route) {
  const p = route.params;
  const filters = Object.fromEntries(FILTERS.map((k) => [k, p.get(k) || '']));
  const cursor = p.get('cursor') || '';
  const key = JSON.stringify(filters);
  if (paging.key !== key) {
    paging.key = key;
    paging.stack = [];
  }
  let root = null;
  const results = h('div', { class: 'results' });

  function hashFor(c) {
    const q = new URLSearchParams();
    for (const k of FILTERS) if (filters[k]) q.set(k, filters[k]);
    if (c) q.set('cursor', c);
    const qs = q.toString();
    return `#/leases${qs ? `?${qs}` : ''}`;
  }

  function form() {
    const sel = (name, label, options) => h('label', null, label, ' ',
      h('select', { name, id: `f-${name}` }, options.map(([v, t]) => h('option', { value: v, selected: filters[name] === v }, t))));
    const f = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter leases' },
      sel('state', 'State', [['', 'any'], ...STATES.map((k) => [k, k])]),
      h('label', null, 'Owner ', h('input', { name: 'owner', id: 'f-owner', value: filters.owner, pattern: '[!-~]{1,128}', size: 14, autocomplete: 'off', spellcheck: 'false' })),
      h('label', null, 'Job id prefix ', h('input', { name: 'prefix', id: 'f-prefix', value: filters.prefix, pattern: '[A-Za-z0-9._:\\-]{0,128}', size: 14, autocomplete: 'off', spellcheck: 'false' })),
      sel('paused', 'Paused', [['', 'any'], ['true', 'paused'], ['false', 'not paused']]),
      h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'overdue', id: 'f-overdue', value: 'true', checked: filters.overdue === 'true' }), ' overdue only'),
      h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'alerting', id: 'f-alerting', value: 'true', checked: filters.alerting === 'true' }), ' alerting only'),
      sel('limit', 'Per page', [['', '50'], ['100', '100'], ['500', '500']]),
      h('button', { type: 'submit' }, 'Apply'),
      h('a', { href: '#/leases' }, 'Clear'));
    f.addEventListener('submit', (e) => {
      e.preventDefault();
      const d = new FormData(f);
      for (const k of FILTERS) filters[k] = (d.get(k) || '').toString().trim();
      location.hash = hashFor('');
    });
    return f;
  }

  return {
    title: 'Leases',
    async load() {
      const page = await api.listLeases({
        state: filters.state, owner: filters.owner, prefix: filters.prefix,
        paused: filters.paused, overdue: filters.overdue, alerting: filters.alerting, limit: filters.limit || 50, cursor,
      });
      const n = paging.stack.length;
      const prev = h('button', { type: 'button', id: 'prev', disabled: !cursor }, n || !cursor ? '← Previous' : '← First page');
      prev.addEventListener('click', () => {
        location.hash = hashFor(paging.stack.length ? paging.stack.pop() : '');
      });
      const next = h('button', { type: 'button', id: 'next', disabled: !page.nextCursor }, 'Next →');
      next.addEventListener('click', () => {
        paging.stack.push(cursor);
        location.hash = hashFor(page.nextCursor);
      });
      const pageNo = cursor ? (n ? `page ${n + 1}` : 'a later page') : 'page 1';
      const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' }, prev,
        h('span', { id: 'page-info' }, `${pageNo} · ${page.leases.length} lease${page.leases.length === 1 ? '' : 's'}${page.nextCursor ? ', more after' : ', last page'}`), next);
      const active = FILTERS.filter((k) => k !== 'limit' && filters[k]).map((k) => `${k} ${filters[k]}`).join(', ');
      // The heading and the filter form are built once per view: a refresh
      // replaces the pages and rows only, so a filter being typed survives it.
      if (!root) root = h('div', null, h('h1', { tabindex: '-1' }, 'Leases'), form(), results);
      replace(results, pager,
        page.leases.length
          ? leaseTable(page.leases, `Leases sorted by job id${active ? `, ${active}` : ''}`)
          : empty(active ? 'No leases match these filters.' : 'No leases yet: a lease appears when a replica first acquires its job.'));
      ctx.render(root);
    },
    tick() {
      if (root) tickExpiries(root);
    },
  };
}

// ---- job --------------------------------------------------------------

/** durationChart draws the durations of runs (oldest left) as bars, with SVG built through the DOM. */
function durationChart(runs) {
  const data = runs.slice().reverse();
  const W = 720, H = 120, pad = 60, top = 8;
  const max = Math.max(1, ...data.map((r) => r.durationMs ?? 0));
  const bw = (W - pad) / Math.max(data.length, 20);
  const svg = s('svg', {
    viewBox: `0 0 ${W} ${H + 18}`, class: 'chart', role: 'img',
    'aria-label': `Durations of the last ${data.length} runs, oldest first; longest ${fmtDuration(max)}. The table below lists them.`,
  });
  svg.append(
    s('line', { x1: pad, y1: top, x2: W, y2: top, class: 'grid' }),
    s('line', { x1: pad, y1: H, x2: W, y2: H, class: 'axis' }),
    s('text', { x: pad - 4, y: top + 4, class: 'label', 'text-anchor': 'end' }, fmtDuration(max)),
    s('text', { x: pad - 4, y: H, class: 'label', 'text-anchor': 'end' }, '0'));
  data.forEach((r, i) => {
    const x = pad + i * bw + 1;
    const tip = s('title', null, `${r.outcome}, ${r.outcome === 'missed' ? 'no run' : fmtDuration(r.durationMs)}, tick ${fmtTime(r.tick)}`);
    if (r.durationMs === null || r.durationMs === undefined) {
      // A missed or running run has no duration: a marker under the axis.
      svg.append(s('rect', { x, y: H + 3, width: Math.max(bw - 2, 1), height: 6, class: `bar outcome-${r.outcome}` }, tip));
      return;
    }
    const bh = Math.max(1, ((H - top) * r.durationMs) / max);
    svg.append(s('rect', { x, y: H - bh, width: Math.max(bw - 2, 1), height: bh, class: `bar outcome-${r.outcome}` }, tip));
  });
  return h('figure', { class: 'chart' }, svg,
    h('figcaption', null, 'Run durations, oldest left. Bars below the axis: runs without a duration (missed or running).'));
}

function dl(pairs) {
  return h('dl', { class: 'facts' }, pairs.filter(Boolean).map(([k, v]) => h('div', null, h('dt', null, k), h('dd', null, v))));
}

function when(iso, countdown) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  return [h('time', { datetime: iso }, fmtTime(iso)), countdown ? [' ', h('span', { class: 'rel', 'data-until': iso }, untilText(iso))] : null];
}

/** canAdmin reports whether the caller may run admin actions on a job. */
export function canAdmin(who, jobId) {
  if (!who) return false;
  if (who.open) return true;
  return who.role === 'admin' && (who.scopes || []).some((sc) => sc === '*' || jobId.startsWith(sc));
}

const ACTIONS = {
  revoke: { label: 'Revoke', title: 'Revoke this lease?', done: 'Revoked', call: (id) => api.revoke(id),
    text: (id) => `Revoke the lease of ${id}: its holder loses it at once (its heartbeat and release will fail) and the run is recorded as revoked.` },
  pause: { label: 'Pause', title: 'Pause this job?', done: 'Paused', reason: true, call: (id, reason) => api.pause(id, reason),
    text: (id) => `Pause ${id}: every acquire is refused until it is resumed; a run in progress is not stopped.` },
  resume: { label: 'Resume', title: 'Resume this job?', done: 'Resumed', call: (id) => api.resume(id),
    text: (id) => `Resume ${id}: acquires are granted again from the next tick; ticks that fell while paused are not run.` },
  trigger: { label: 'Run now', title: 'Run this job now?', done: 'Triggered', reason: true,
    call: (id, reason) => api.trigger(id, reason, newKey()),
    text: (id) => `Run ${id} now: it owes one manual tick, which the next replica that claims owed ticks runs once. It runs in addition to its schedule, not instead of it.` },
  cancelTrigger: { label: 'Cancel run now', title: 'Cancel the run now?', done: 'Cancelled the run now of', call: (id) => api.cancelTrigger(id),
    text: (id) => `Cancel the manual tick ${id} owes: no replica will claim it. A run already started is not stopped.` },
  repair: { label: 'Repair', title: 'Repair this job?', done: 'Repaired', reason: true, call: (id, reason) => api.repair(id, reason),
    text: (id) => `Repair ${id}: undo what ticks later than the server's clock plus its window (a replica whose clock was fast) did to it. A grant of such a tick is revoked, the runs of such ticks are marked discarded, and the last completed tick goes back to the newest succeeded tick before, so later ticks are granted again. A job with nothing ahead is left as it is.` },
  forget: { label: 'Forget schedule', title: 'Forget the schedule?', done: 'Forgot the schedule of', call: (id) => api.forgetSchedule(id),
    text: (id) => `Forget the schedule of ${id}: no more missed-tick accounting until a replica sends a schedule again.` },
};

/** newKey is a fresh Idempotency-Key for one confirmed trigger. */
function newKey() {
  // getRandomValues, unlike randomUUID, works on a plain-http origin too.
  const b = crypto.getRandomValues(new Uint8Array(16));
  return `console-${Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')}`;
}

/** conditions are the set conditions of a policy, in words. */
function conditions(p) {
  const runs = (n) => `${n} run${n === 1 ? '' : 's'}`;
  return [
    p.consecutiveFailures ? `${runs(p.consecutiveFailures)} in a row failed or expired` : null,
    p.failureRate ? `at least ${Math.round(p.failureRate.threshold * 1000) / 10}% of the newest ${runs(p.failureRate.runs)} failed or expired` : null,
    p.maxRuntimeMs ? `a run held longer than ${fmtDuration(p.maxRuntimeMs)}` : null,
    p.minRuntimeMs ? `a success sooner than ${fmtDuration(p.minRuntimeMs)}` : null,
    p.missedTicks ? `${p.missedTicks} missed tick${p.missedTicks === 1 ? '' : 's'} in a row` : null,
  ].filter(Boolean);
}

/** policySection shows the job's alert policy and where it stands, or that it has none. */
function policySection(policy) {
  if (!policy) {
    return section('Alert policy', h('p', { class: 'muted', id: 'policy-none' },
      'No alert policy: set one with PUT /leases/{jobId}/policy to be told (job.alerting, job.ok) when this job fails, runs too long or too short, or misses its ticks.'));
  }
  const alerting = policy.status === 'alerting';
  return section('Alert policy', dl([
    ['Status', h('span', { class: `badge policy-${policy.status}`, id: 'policy-status' }, policy.status)],
    alerting ? ['Reasons', h('span', { class: 'reasons', id: 'policy-reasons' }, policy.alertReasons.join(', '))] : null,
    [alerting ? 'Alerting since' : 'OK since', when(policy.statusSince)],
    alerting ? ['Last told', when(policy.lastAlertAt)] : null,
    ['Alerts on', h('ul', { class: 'conditions', id: 'policy-conditions' }, conditions(policy).map((c) => h('li', null, c)))],
    ['Recovers after', `${policy.recoveryThreshold} clean success${policy.recoveryThreshold === 1 ? '' : 'es'} in a row`],
    ['Repeats', policy.realertAfterMs ? `every ${fmtDuration(policy.realertAfterMs)} while alerting` : 'never'],
    ['Set', [when(policy.updatedAt), policy.updatedBy ? ` by ${policy.updatedBy}` : null]],
  ]));
}

/** getPolicy reads the job's policy, null when it has none. */
async function getPolicy(id) {
  try {
    return await api.getPolicy(id);
  } catch (e) {
    if (e.status === 404) return null;
    throw e;
  }
}

export function job(ctx, route) {
  const id = route.id;
  let root = null;

  async function act(kind) {
    const a = ACTIONS[kind];
    const answer = await ctx.confirm({ title: a.title, text: a.text(id), ok: a.label, reason: !!a.reason });
    if (!answer.ok) return;
    try {
      await a.call(id, answer.reason);
      ctx.notify(`${a.done} ${id}.`);
    } catch (e) {
      ctx.actionFailed(e, `${a.label} ${id}`);
    }
    await ctx.reload();
  }

  function actions(lease) {
    if (!canAdmin(ctx.who(), id)) {
      const who = ctx.who();
      return h('p', { class: 'muted', id: 'admin-note' }, who && !who.open
        ? `Admin actions (run now, revoke, pause, resume, repair, forget schedule) need a credential of role admin for this job; yours is ${who.role}.`
        : '');
    }
    const btn = (kind, cls) => h('button', { type: 'button', id: `act-${kind}`, class: cls, onclick: () => act(kind) }, ACTIONS[kind].label);
    // A paused job cannot be triggered; a manual tick owed can be cancelled.
    return h('div', { class: 'actions', role: 'group', 'aria-label': 'Admin actions' },
      lease.paused ? null : btn('trigger'),
      lease.owedReason === 'manual' ? btn('cancelTrigger') : null,
      lease.state === 'held' ? btn('revoke', 'danger') : null,
      lease.paused ? btn('resume') : btn('pause'),
      btn('repair'),
      lease.schedule ? btn('forget') : null);
  }

  return {
    title: `Job ${id}`,
    async load() {
      let lease;
      try {
        lease = await api.getLease(id);
      } catch (e) {
        if (e.status === 404 || e.status === 400 || (e.status === 403 && e.code === 'forbidden')) {
          ctx.render(h('div', null,
            h('p', { class: 'crumbs' }, h('a', { href: '#/leases' }, 'Leases'), ' › ', h('span', null, id)),
            h('h1', { tabindex: '-1' }, e.status === 403 ? 'Not in your scopes' : 'No such job'),
            h('p', { class: 'empty' }, e.status === 404
              ? `There is no lease for job “${id}”.`
              : e.status === 403 ? e.detail : `“${id}” is not a valid job id: ${e.detail}`)));
          root = null;
          return;
        }
        throw e;
      }
      const [runs, policy] = await Promise.all([api.listRuns(id, 100).then((r) => r.runs), getPolicy(id)]);
      root = h('div', null,
        h('p', { class: 'crumbs' }, h('a', { href: '#/leases' }, 'Leases'), ' › ', h('span', null, id)),
        h('h1', { tabindex: '-1' }, h('span', { class: 'jobid', id: 'job-id' }, lease.jobId), ' ', badge('state', lease.state),
          lease.paused ? [' ', badge('flag', 'paused')] : null, alertingFlag(lease)),
        actions(lease),
        h('div', { class: 'columns' },
          section('Lease', dl([
            ['State', badge('state', lease.state)],
            ['Holder', h('span', { class: 'owner', id: 'job-owner' }, lease.owner)],
            ['Token', String(lease.token)],
            ['Tick', when(lease.tick)],
            ['Acquired', when(lease.acquiredAt)],
            ['Renewed', when(lease.renewedAt)],
            ['Expires', lease.state === 'held'
              ? [h('time', { datetime: lease.expiresAt }, fmtTime(lease.expiresAt)), ' ', h('span', { class: 'rel', 'data-expires': lease.expiresAt }, expiryText(lease.expiresAt))]
              : when(lease.expiresAt)],
            ['Released', when(lease.releasedAt)],
            ['TTL', fmtDuration(lease.ttlMs)],
            ['Last outcome', lease.lastOutcome ? badge('outcome', lease.lastOutcome) : 'none yet'],
            ['Last completed tick', when(lease.lastCompletedTick)],
            lease.revokedBy ? ['Revoked by', lease.revokedBy] : null,
          ])),
          section('Schedule', dl([
            ['Schedule', lease.schedule ? h('code', null, lease.schedule) : h('span', { class: 'muted' }, 'none (no missed-tick accounting)')],
            ['Grace', lease.graceMs === null ? '—' : fmtDuration(lease.graceMs)],
            ['Next tick', when(lease.nextTick, true)],
            ['Owed tick', lease.owedTick
              ? [h('time', { id: 'owed-tick', datetime: lease.owedTick }, fmtTime(lease.owedTick)), ' ',
                  h('span', { class: 'badge flag-owed', id: 'owed-reason' }, lease.owedReason === 'manual' ? 'run now' : lease.owedReason)]
              : h('span', { class: 'muted', id: 'owed-none' }, 'none')],
            ['Missed ticks', h('span', { id: 'missed' }, fmtCount(lease.missedTicks))],
            ['Skipped ticks', h('span', { id: 'skipped' }, fmtCount(lease.skippedTicks))],
            ['Paused', lease.paused ? 'yes' : 'no'],
            lease.paused ? ['Paused by', lease.pausedBy ?? '—'] : null,
            lease.paused ? ['Paused at', when(lease.pausedAt)] : null,
            lease.paused ? ['Reason', lease.pausedReason || h('span', { class: 'muted' }, 'none given')] : null,
          ])),
          policySection(policy)),
        section('Runs',
          runs.length ? [durationChart(runs), runsTable(runs, false, `The newest ${runs.length} runs, newest first`)]
            : empty('No runs are recorded for this job (runs are kept for the history retention).')),
      );
      ctx.render(root);
    },
    tick() {
      if (root) tickExpiries(root);
    },
  };
}

// ---- groups -----------------------------------------------------------

// GROUPS_PAGE is how many groups the view reads; it says when there are more.
const GROUPS_PAGE = 1000;

/** groupRows are a group's rows: one per holder (the first carries the group), or one without any. */
function groupRows(g) {
  const full = g.held >= g.limit;
  const head = (span) => [
    h('th', { scope: 'row', rowspan: span }, g.name),
    h('td', { class: 'num', rowspan: span }, fmtCount(g.limit)),
    h('td', { class: 'num', rowspan: span }, fmtCount(g.held), full ? [' ', h('span', { class: 'badge flag-full' }, 'full')] : null),
  ];
  if (!g.holders.length) {
    // The API shows only the holders within the caller's scopes.
    const none = g.held > 0 ? 'held by jobs outside your scopes' : 'no holder';
    return [h('tr', { 'data-group': g.name }, head(1), h('td', { class: 'muted', colspan: 5 }, none))];
  }
  return g.holders.map((x, i) => h('tr', { 'data-group': g.name, 'data-holder': x.jobId },
    i === 0 ? head(g.holders.length) : null,
    h('td', null, h('a', { href: jobHref(x.jobId) }, x.jobId)),
    h('td', { class: 'owner' }, x.owner),
    h('td', { class: 'num' }, String(x.slot)),
    h('td', { class: 'num' }, String(x.slotToken)),
    h('td', { 'data-expires': x.expiresAt, title: fmtTime(x.expiresAt) }, expiryText(x.expiresAt))));
}

/** groups lists the concurrency groups within the caller's scopes: limit, slots in use and who holds them. */
export function groups(ctx) {
  let root = null;
  return {
    title: 'Groups',
    async load() {
      const page = await api.listGroups({ limit: GROUPS_PAGE });
      const list = page.groups;
      root = h('div', null,
        h('h1', { tabindex: '-1' }, 'Groups'),
        h('p', { class: 'muted' }, 'Concurrency groups within your scopes: at most limit of a group\'s jobs hold a lease at once. Create one with PUT /groups/{name}; a job joins with "group" on its acquire.'),
        list.length
          ? h('table', { class: 'groups' },
            h('caption', null, `${list.length} group${list.length === 1 ? '' : 's'}, by name${page.nextCursor ? ` (the first ${GROUPS_PAGE}; GET /groups pages through the rest)` : ''}`),
            h('thead', null, h('tr', null,
              ['Group', 'Limit', 'Held', 'Holder', 'Owner', 'Slot', 'Slot token', 'Frees'].map((c) =>
                h('th', { scope: 'col', class: ['Limit', 'Held', 'Slot', 'Slot token'].includes(c) ? 'num' : null }, c)))),
            h('tbody', null, list.map(groupRows)))
          : empty('No groups within your scopes.'));
      ctx.render(root);
    },
    tick() {
      if (root) tickExpiries(root);
    },
  };
}

// ---- webhooks ---------------------------------------------------------

/** deliveryCell describes a webhook's newest attempt: delivered, the status that refused it, or the error. */
function deliveryCell(d) {
  if (!d) return h('td', { class: 'muted', 'data-delivery': 'none' }, 'none yet');
  const what = d.delivered
    ? badge('delivery', 'delivered')
    : h('span', { class: 'badge delivery-failed' }, 'failed');
  const why = d.status !== null ? `HTTP ${d.status}` : (d.error || 'no answer');
  return h('td', { 'data-delivery': d.delivered ? 'delivered' : 'failed' },
    what, ' ', h('span', { class: 'why' }, why), ' ',
    h('span', { class: 'muted' }, `${d.eventType} of `, h('a', { href: jobHref(d.jobId) }, d.jobId),
      `, attempt ${d.attempt}, `, h('time', { datetime: d.at }, fmtTime(d.at))));
}

/** webhooks lists the webhooks within the caller's scopes, read-only: they are managed through the API. */
export function webhooks(ctx) {
  return {
    title: 'Webhooks',
    async load() {
      let list;
      try {
        list = (await api.listWebhooks()).webhooks;
      } catch (e) {
        if (e.status !== 403) throw e;
        ctx.render(h('div', null, h('h1', { tabindex: '-1' }, 'Webhooks'),
          h('p', { class: 'empty', id: 'webhooks-forbidden' }, `Webhooks need a credential of role admin. ${e.detail || ''}`)));
        return;
      }
      const rows = list.map((w) => h('tr', { 'data-webhook': w.id },
        h('th', { scope: 'row' }, h('code', null, w.id)),
        h('td', { class: 'url' }, w.url),
        h('td', null, w.events.join(', ')),
        h('td', null, w.format),
        h('td', null, w.scopes.join(' ')),
        deliveryCell(w.lastDelivery)));
      ctx.render(h('div', null,
        h('h1', { tabindex: '-1' }, 'Webhooks'),
        h('p', { class: 'muted' }, 'The webhooks within your scopes, read-only: create and delete them with POST and DELETE /webhooks. URLs are shown redacted; secrets are shown only once, when a webhook is created.'),
        list.length
          ? h('table', { class: 'webhooks' },
            h('caption', null, `${list.length} webhook${list.length === 1 ? '' : 's'}, by id`),
            h('thead', null, h('tr', null,
              ['Id', 'URL', 'Events', 'Format', 'Scopes', 'Last delivery'].map((c) => h('th', { scope: 'col' }, c)))),
            h('tbody', null, rows))
          : empty('No webhooks within your scopes. A team subscribes one with POST /webhooks.')));
    },
    tick() {},
  };
}
