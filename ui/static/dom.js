// Small DOM helpers. Data is only ever set as text (textContent, attribute
// values), never parsed as markup: job ids and owners come from whoever
// holds a token.

/**
 * h builds an element: h('a', {href: '#/x', class: 'y'}, 'text', child).
 * Attributes are set with setAttribute (or as properties for on* handlers
 * given as functions); children are nodes or strings (as text nodes);
 * null, undefined and false children are skipped.
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG = 'http://www.w3.org/2000/svg';

/** s builds an SVG element the same way. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (typeof v === 'function') {
      el.addEventListener(k.replace(/^on/, ''), v);
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** replace empties el and appends children. */
export function replace(el, ...children) {
  // A refresh that keeps a view's frame (its form, say) passes the node el
  // already shows: leave it in place, so that what is typed and the focus
  // in it stay.
  if (children.length === 1 && el.childNodes.length === 1 && el.firstChild === children[0]) return el;
  el.replaceChildren();
  append(el, children);
  return el;
}

/** fmtTime writes an API time as YYYY-MM-DD HH:MM:SS UTC (or — for null). */
export function fmtTime(iso) {
  if (!iso) return '—';
  return iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace('Z', ' UTC');
}

/** fmtShortTime writes an API time as HH:MM:SS (UTC). */
export function fmtShortTime(iso) {
  if (!iso) return '—';
  const m = /T(\d\d:\d\d:\d\d)/.exec(iso);
  return m ? m[1] : iso;
}

/** fmtDuration writes milliseconds as 850 ms, 12.3 s, 4m 05s, 2h 03m, 3d 04h. */
export function fmtDuration(ms) {
  if (ms === null || ms === undefined) return '—';
  const neg = ms < 0;
  let v = Math.abs(ms);
  let out;
  if (v < 1000) out = `${Math.round(v)} ms`;
  else if (v < 60e3) out = `${(v / 1000).toFixed(v < 10e3 ? 2 : 1)} s`;
  else if (v < 3600e3) out = `${Math.floor(v / 60e3)}m ${pad(Math.floor(v / 1000) % 60)}s`;
  else if (v < 86400e3) out = `${Math.floor(v / 3600e3)}h ${pad(Math.floor(v / 60e3) % 60)}m`;
  else out = `${Math.floor(v / 86400e3)}d ${pad(Math.floor(v / 3600e3) % 24)}h`;
  return neg ? `-${out}` : out;
}

function pad(n) {
  return String(n).padStart(2, '0');
}

/** fmtCount writes an integer with thin grouping (12 345). */
export function fmtCount(n) {
  return n === null || n === undefined ? '—' : Number(n).toLocaleString('en-US').replace(/,/g, '\u202f');
}
