// app.js wires the console: hash routing (#/, #/leases?…, #/jobs/{id},
// #/groups, #/webhooks),
// the token prompt on 401, the 5 s refresh that can be paused, and the
// status line that says when the data on screen is stale.

import * as api from './api.js';
import { h, replace, fmtShortTime, fmtDuration } from './dom.js';
import { overview, leases, job, groups, webhooks } from './views.js';

const REFRESH_MS = 5000;
// Data older than this is marked stale: two refreshes missed.
const STALE_MS = 2 * REFRESH_MS + 1000;

const main = document.getElementById('main');
const statusEl = document.getElementById('status');
const pauseBtn = document.getElementById('pause-refresh');
const whoEl = document.getElementById('who');
const versionEl = document.getElementById('version');
const noticeEl = document.getElementById('notice');

const state = {
  who: null,
  view: null,
  routeKey: '',
  rendered: false, // the current route has shown data
  lastOK: 0, // Date.now() of the last successful load
  lastOKServer: null, // the server's time then
  error: null, // the last refresh's error, null after a success
  paused: false,
  needToken: false,
  timer: 0,
  loading: false,
  again: false,
};

function parseRoute() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
  if (path === '/' || path === '') return { name: 'overview', params };
  if (path === '/leases') return { name: 'leases', params };
  if (path === '/webhooks') return { name: 'webhooks', params };
  if (path === '/groups') return { name: 'groups', params };
  const m = /^\/jobs\/(.+)$/.exec(path);
  if (m) {
    let id = m[1];
    try {
      id = decodeURIComponent(id);
    } catch {
      // keep it as written
    }
    return { name: 'job', id, params };
  }
  return { name: 'unknown', path };
}

const ctx = {
  who: () => state.who,
  render(node) {
    const first = !state.rendered;
    const focusKey = document.activeElement?.dataset?.focus;
    replace(main, node);
    main.setAttribute('aria-busy', 'false');
    main.dataset.shown = state.routeKey; // which route the content is of (tests wait for it)
    state.rendered = true;
    if (first) {
      main.querySelector('h1')?.focus({ preventScroll: true });
    } else if (focusKey) {
      // A refresh rebuilt the view: keep the keyboard where it was.
      for (const el of main.querySelectorAll('[data-focus]')) {
        if (el.dataset.focus === focusKey) {
          el.focus({ preventScroll: true });
          break;
        }
      }
    }
  },
  confirm: confirmDialog,
  notify(text, isError) {
    noticeEl.textContent = text;
    noticeEl.className = isError ? 'notice error' : 'notice';
    noticeEl.hidden = false;
    clearTimeout(ctx.noticeTimer);
    ctx.noticeTimer = setTimeout(() => {
      noticeEl.hidden = true;
    }, 10000);
  },
  actionFailed(e, what) {
    if (e.status === 401) {
      authNeeded(e);
      return;
    }
    if (e.status === 403) {
      ctx.notify(`Not allowed: ${what} needs a credential of role admin for this job. ${e.detail || ''}`, true);
      return;
    }
    ctx.notify(`${what} failed (${e.status || 'no answer'} ${e.code}): ${e.detail}`, true);
  },
  reload: () => load(),
};

function confirmDialog({ title, text, ok, reason }) {
  const dlg = document.getElementById('confirm');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  document.getElementById('confirm-ok').textContent = ok;
  const row = document.getElementById('confirm-reason-row');
  const input = document.getElementById('confirm-reason');
  row.hidden = !reason;
  input.value = '';
  dlg.returnValue = '';
  return new Promise((resolve) => {
    const onClose = () => {
      // The close event is queued: one of an earlier showing can arrive
      // after this one opened. Only a close of this showing answers.
      if (dlg.open) return;
      dlg.removeEventListener('close', onClose);
      resolve({ ok: dlg.returnValue === 'ok', reason: input.value.trim() });
    };
    dlg.addEventListener('close', onClose);
    dlg.showModal();
    (reason ? input : document.getElementById('confirm-cancel')).focus();
  });
}

// ---- auth -----------------------------------------------------------

function showWho() {
  const w = state.who;
  // Webhooks are an admin's: the link is offered to admins (and in open mode).
  document.getElementById('nav-webhooks').hidden = !(w && (w.open || w.role === 'admin'));
  if (!w) {
    replace(whoEl);
    return;
  }
  if (w.open) {
    replace(whoEl, h('span', { title: 'No credential exists yet: the API is open to every caller.' }, 'open mode'));
    return;
  }
  replace(whoEl,
    h('span', { title: `scopes: ${(w.scopes || []).join(' ')}` }, `${w.name} · ${w.role}`),
    ' ',
    h('button', { type: 'button', class: 'link', onclick: signOut }, 'Forget token'));
}

function signOut() {
  api.setToken(null);
  state.who = null;
  showWho();
  authNeeded(null);
}

/** authNeeded shows the 401 state and asks for a token (once per refusal). */
function authNeeded(err) {
  state.needToken = true;
  clearTimeout(state.timer);
  const had = !!api.token();
  replace(main, h('div', { class: 'state-401' },
    h('h1', { tabindex: '-1' }, 'Credential needed'),
    h('p', { id: 'auth-state' }, had
      ? `The API refused the token (401${err?.detail ? `: ${err.detail}` : ''}). Enter another one.`
      : 'This leaseapi needs a credential (401). Enter a token to continue.'),
    h('button', { type: 'button', id: 'enter-token', onclick: () => askToken(err) }, 'Enter a token')));
  main.setAttribute('aria-busy', 'false');
  state.rendered = false;
  setStatus('auth', 'Waiting for a token');
  askToken(err);
}

function askToken(err) {
  const dlg = document.getElementById('login');
  if (dlg.open) return;
  const errEl = document.getElementById('login-error');
  const had = !!api.token();
  errEl.hidden = !had;
  errEl.textContent = had ? `The API refused the token${err?.detail ? `: ${err.detail}` : ''}.` : '';
  const input = document.getElementById('login-token');
  input.value = '';
  dlg.returnValue = '';
  const onClose = async () => {
    if (dlg.open) return; // a close of an earlier showing, queued
    dlg.removeEventListener('close', onClose);
    if (dlg.returnValue !== 'ok' || !input.value.trim()) return;
    api.setToken(input.value.trim());
    input.value = '';
    await start();
  };
  dlg.addEventListener('close', onClose);
  dlg.showModal();
  input.focus();
}

// ---- loading and refresh --------------------------------------------

function setStatus(kind, text) {
  document.body.dataset.status = kind;
  if (statusEl.textContent !== text) statusEl.textContent = text;
}

function statusTick() {
  if (state.needToken) return;
  const age = state.lastOK ? Date.now() - state.lastOK : 0;
  const asOf = state.lastOKServer ? `data as of ${fmtShortTime(state.lastOKServer)} UTC, ${fmtDuration(age)} old` : 'no data yet';
  if (state.error && state.rendered) {
    setStatus('stale', `Stale: the last refresh failed (${state.error.detail || state.error.code}); ${asOf}`);
  } else if (state.rendered && age > STALE_MS) {
    setStatus('stale', `Stale: ${asOf}${state.paused ? ' (refresh paused)' : ''}`);
  } else if (state.paused) {
    setStatus('paused', `Refresh paused; ${asOf}`);
  } else if (state.rendered) {
    setStatus('live', `Live, refreshed every ${REFRESH_MS / 1000} s; ${asOf.replace(/, [^,]* old$/, '')}`);
  }
  state.view?.tick?.();
}

async function load() {
  if (!state.view || state.needToken) return;
  if (state.loading) {
    state.again = true; // an action changed something: read again after this load
    return;
  }
  state.loading = true;
  clearTimeout(state.timer);
  const view = state.view;
  try {
    await view.load();
    if (view !== state.view) return;
    state.lastOK = Date.now();
    state.lastOKServer = new Date(api.serverNow()).toISOString();
    state.error = null;
  } catch (e) {
    if (view !== state.view) return;
    if (!(e instanceof api.APIError)) e = new api.APIError(0, 'console', String(e?.message || e));
    if (e.status === 401) {
      authNeeded(e);
      return;
    }
    state.error = e;
    if (!state.rendered) renderError(e);
  } finally {
    if (view === state.view) {
      state.loading = false;
      statusTick();
      if (!state.needToken && (state.again || !state.paused)) {
        state.timer = setTimeout(load, state.again ? 0 : REFRESH_MS);
      }
      state.again = false;
    }
  }
}

/** renderError is the error state of a view that has shown nothing yet. */
function renderError(e) {
  let title;
  let text = e.detail || e.code;
  switch (true) {
    case e.status === 0:
      title = 'leaseapi does not answer';
      text = `${text}. The console retries every ${REFRESH_MS / 1000} s.`;
      break;
    case e.status === 403:
      title = 'Not allowed (403)';
      text = `${text}. Reading needs a credential of role read or higher.`;
      break;
    case e.status === 429:
      title = 'Rate limited (429)';
      text = `${text}. Retrying after ${e.extra.retryAfter || 'a few'} s.`;
      break;
    case e.status === 503:
      title = 'leaseapi is unavailable (503)';
      break;
    default:
      title = `The request failed (${e.status} ${e.code})`;
  }
  replace(main, h('div', { class: 'state-error', role: 'alert' }, h('h1', { tabindex: '-1' }, title), h('p', null, text)));
  main.setAttribute('aria-busy', 'false');
}

function route() {
  const r = parseRoute();
  const key = location.hash;
  if (key === state.routeKey && state.view) return;
  state.routeKey = key;
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === r.name || (r.name === 'job' && a.dataset.nav === 'leases')) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  clearTimeout(state.timer);
  state.rendered = false;
  state.error = null;
  state.loading = false;
  state.again = false;
  main.setAttribute('aria-busy', 'true');
  replace(main, h('p', { class: 'loading' }, 'Loading…'));
  if (r.name === 'unknown') {
    state.view = null;
    replace(main, h('div', null, h('h1', { tabindex: '-1' }, 'No such page'), h('p', null, h('a', { href: '#/' }, 'Go to the overview'))));
    main.setAttribute('aria-busy', 'false');
    return;
  }
  state.view = { overview, leases, job, groups, webhooks }[r.name](ctx, r);
  document.title = `${state.view.title} · leaseapi console`;
  load();
}

// showVersion names the version of the instance that served the console; a
// failure leaves it blank, since every view reports the server's errors.
async function showVersion() {
  try {
    versionEl.textContent = (await api.health()).version;
  } catch {
    versionEl.textContent = '';
  }
}

async function start() {
  state.needToken = false;
  try {
    state.who = await api.whoami();
  } catch (e) {
    if (e.status === 401) {
      authNeeded(e);
      return;
    }
    state.who = null; // shown as unknown; the views report the error
  }
  showWho();
  state.routeKey = '';
  route();
}

pauseBtn.addEventListener('click', () => {
  state.paused = !state.paused;
  pauseBtn.setAttribute('aria-pressed', String(state.paused));
  pauseBtn.textContent = state.paused ? 'Resume refresh' : 'Pause refresh';
  clearTimeout(state.timer);
  if (!state.paused) load();
  statusTick();
});
window.addEventListener('hashchange', route);
setInterval(statusTick, 1000);
showVersion();
start();
