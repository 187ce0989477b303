// Live updates without reloading: every second the console asks GET /changes for the token of
// what the current page shows (a read of a few counters) and reloads the page's data only when
// the token moved; pages that show something running (a job's steps) also reload on every
// tick. Polling stops while the tab is hidden. Measured in docs/user-guide.md, "Web console".
import { get } from './api.js';

export const POLL_MS = 1000;
let timer = 0;
let current = null; // { scope, onChange, onTick, token }
let busy = false;

function status(text) {
  const el = document.getElementById('live');
  if (el && el.textContent !== text) el.textContent = text; // announced only when it changes
}

// A reload rebuilds part of the page: the element that had the focus is found again by its id,
// or by its action, label and row, so the keyboard does not lose its place every second.
function focusKey() {
  const a = document.activeElement;
  if (!a || a === document.body || a.id === 'main') return null;
  const row = a.closest('tr');
  return { id: a.id, tag: a.tagName, text: a.textContent, row: row ? JSON.stringify(row.dataset) : '' };
}

function refocus(k) {
  if (!k || (document.activeElement && document.activeElement !== document.body)) return;
  let el = k.id ? document.getElementById(k.id) : null;
  if (!el) {
    el = [...document.querySelectorAll(`main ${k.tag}`)].find((e) => e.textContent === k.text &&
      JSON.stringify((e.closest('tr') || {}).dataset || {}) === (k.row || '{}')) || null;
  }
  if (el) el.focus({ preventScroll: true });
}

async function tick() {
  const w = current;
  if (!w || busy || document.hidden) return;
  busy = true;
  try {
    const d = await get('/changes', w.scope);
    if (w !== current) return;
    const changed = w.token !== null && d.token !== w.token;
    w.token = d.token;
    const k = focusKey();
    if (changed) await w.onChange();
    else if (w.onTick) await w.onTick();
    refocus(k);
    status('● live');
  } catch (e) {
    status('○ offline');
  } finally {
    busy = false;
  }
}

// Watches scope ({project, model}) for the page: onChange runs when the token moves, onTick
// (optional) on every other tick.
export function watch(scope, onChange, onTick) {
  current = { scope, onChange, onTick, token: null };
  clearInterval(timer);
  timer = setInterval(tick, POLL_MS);
  tick();
}

export function unwatch() {
  current = null;
  clearInterval(timer);
  timer = 0;
}

document.addEventListener('visibilitychange', () => { if (!document.hidden) tick(); });
