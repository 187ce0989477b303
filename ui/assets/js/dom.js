// Building the DOM from data: text is always set as text (never parsed as HTML).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const SYM = {
  READY: '✓', FINISHED: '✓', SUCCEED: '✓', COVERED: '✓',
  WARNING: '⚠', COVERED_WITH_WARNING: '⚠', PARTIAL_OVERLAP: '◐', BLOCKED: '⊗',
  NEW: '◌', PENDING: '…', RUNNING: '▶', IN_PROGRESS: '▶', SUBMITTED: '➚',
  MASTER: '★', STANDBY: '○', QUERY: '?',
  ERROR: '✕', RETRYABLE_FAILURE: '↻', DISCARDED: '⊘', STOPPED: '‖', PAUSED: '‖', SUICIDAL: '⊘', SKIPPED: '–', SKIP: '–',
};

// A status in words with a symbol; the colour only repeats what the text says.
export function badge(status, title) {
  return h('span', { class: `badge s-${status}`, 'data-sym': SYM[status] || '•', title }, status);
}

const fmtCache = new Map();
function formatter(zone, withSeconds) {
  const key = `${zone}|${withSeconds}`;
  if (!fmtCache.has(key)) {
    fmtCache.set(key, new Intl.DateTimeFormat('en-CA', {
      timeZone: zone || 'UTC', year: 'numeric', month: '2-digit', day: '2-digit',
      hour: '2-digit', minute: '2-digit', second: withSeconds ? '2-digit' : undefined, hourCycle: 'h23',
    }));
  }
  return fmtCache.get(key);
}

// Epoch ms as "2026-09-01 08:00:00" in zone; "–" for 0 (not yet).
export function time(ms, zone, withSeconds = true) {
  if (!ms) return '–';
  const p = Object.fromEntries(formatter(zone, withSeconds).formatToParts(new Date(ms)).map((x) => [x.type, x.value]));
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}${withSeconds ? `:${p.second}` : ''}`;
}

export function duration(ms) {
  if (!ms) return '–';
  const s = Math.round(ms / 1000);
  if (s < 1) return `${ms} ms`;
  if (s < 120) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 120) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function bytes(n) {
  if (!n) return '0 B';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
}

export function kv(pairs) {
  return h('dl', { class: 'kv' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

export function link(href, ...children) {
  return h('a', { href, 'data-link': true }, ...children);
}
