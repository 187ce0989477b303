// What every page shares: the session (who is logged in, whether they may act), messages,
// the confirmation dialog and navigation.
import { h, clear } from './dom.js';

export const session = { user: '', role: '', writable: false, mode: '' };

let navigateFn = () => {};
export function setNavigate(fn) { navigateFn = fn; }
export function navigate(path, replace = false) { navigateFn(path, replace); }

let bannerTimer = 0;
// A message at the bottom of the window: the server's refusal (kept until dismissed) or a
// short confirmation.
export function say(text, ok = false) {
  const b = document.getElementById('banner');
  clearTimeout(bannerTimer);
  clear(b, h('span', { id: 'banner-text' }, text),
    h('button', { type: 'button', onclick: () => { b.hidden = true; } }, 'Dismiss'));
  b.classList.toggle('ok', ok);
  b.hidden = false;
  if (ok) bannerTimer = setTimeout(() => { b.hidden = true; }, 4000);
}

export function sayError(e, what) {
  const code = e.code ? ` (${e.code})` : '';
  say(`${what}: ${e.message}${code}`);
}

// Asks before an action; resolves true when confirmed.
export function confirmAction(title, text, okLabel) {
  const d = document.getElementById('confirm');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  const ok = document.getElementById('confirm-ok');
  const cancel = document.getElementById('confirm-cancel');
  ok.textContent = okLabel;
  return new Promise((resolve) => {
    const done = (v) => {
      ok.removeEventListener('click', onOk);
      cancel.removeEventListener('click', onCancel);
      d.removeEventListener('cancel', onCancel);
      if (d.open) d.close();
      resolve(v);
    };
    const onOk = () => done(true);
    const onCancel = () => done(false);
    ok.addEventListener('click', onOk);
    cancel.addEventListener('click', onCancel);
    d.addEventListener('cancel', onCancel);
    d.showModal();
    cancel.focus();
  });
}

// An action button, present only for users whose writes this server takes.
export function actionButton(label, onclick, attrs = {}) {
  if (!session.writable) return null;
  return h('button', { type: 'button', 'data-action': label, onclick, ...attrs }, label);
}

export function page(title, ...crumbs) {
  document.title = `${title} · Qilin`;
  return h('div', { class: 'crumbs' }, crumbs);
}
