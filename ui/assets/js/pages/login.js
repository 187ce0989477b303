// Login: the user's Basic credentials are checked with GET /user/authentication and kept for
// this tab only (sessionStorage), sent as an Authorization header on every API call.
import { auth, call } from '../api.js';
import { h, clear } from '../dom.js';
import { navigate, page } from '../ui.js';

export async function render(main, params, query) {
  const err = h('p', { class: 'error', role: 'alert', id: 'login-error' });
  const user = h('input', { id: 'user', name: 'user', autocomplete: 'username', required: true, value: 'ADMIN' });
  const pw = h('input', { id: 'password', name: 'password', type: 'password', autocomplete: 'current-password', required: true });
  const form = h('form', { onsubmit: async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    const token = btoa(String.fromCharCode(...new TextEncoder().encode(`${user.value}:${pw.value}`)));
    try {
      await call('GET', '/user/authentication', { token });
      auth.set(user.value, pw.value);
    } catch (e) {
      err.textContent = e.status === 401 ? 'Wrong user name or password (or too many failed logins: wait a minute).' : e.message;
      return;
    }
    const next = query.get('next');
    navigate(next && next.startsWith('/ui/') && !next.startsWith('/ui/login') ? next : '/ui/projects', true);
  } },
  h('label', {}, 'User', user),
  h('label', {}, 'Password', pw),
  h('button', { type: 'submit', class: 'primary' }, 'Log in'),
  err);
  clear(main, h('div', { class: 'login card' }, page('Log in'), h('h1', {}, 'Log in to Qilin'), form,
    h('p', { class: 'muted' }, 'Users are those of qilin.server.users. With none configured, the user is ADMIN and its password is in admin.password in the server\'s data directory.')));
  pw.focus();
}
