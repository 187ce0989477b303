// The console's entry: the session, the client-side router (History API: every /ui/... URL is
// a deep link, the back button works) and the pages.
import { auth, get, setUnauthorizedHandler } from './api.js';
import { h, clear } from './dom.js';
import { session, setNavigate, navigate } from './ui.js';
import { unwatch } from './live.js';
import * as login from './pages/login.js';
import * as projects from './pages/projects.js';
import * as project from './pages/project.js';
import * as model from './pages/model.js';
import * as jobs from './pages/jobs.js';
import * as job from './pages/job.js';
import * as cluster from './pages/cluster.js';

const routes = [
  [/^\/ui\/login$/, login, 'login'],
  [/^\/ui\/projects$/, projects, 'projects'],
  [/^\/ui\/projects\/([^/]+)$/, project, 'projects'],
  [/^\/ui\/projects\/([^/]+)\/models\/([^/]+)$/, model, 'projects'],
  [/^\/ui\/jobs$/, jobs, 'jobs'],
  [/^\/ui\/jobs\/([^/]+)$/, job, 'jobs'],
  [/^\/ui\/cluster$/, cluster, 'cluster'],
];

const main = document.getElementById('main');
let generation = 0;

async function loadSession() {
  const d = await get('/user/authentication');
  Object.assign(session, { user: d.username, role: d.role, writable: d.writable, mode: d.server_mode });
  document.getElementById('who-name').textContent = d.username;
  document.getElementById('who-role').textContent = d.role;
  document.getElementById('who').hidden = false;
}

async function show() {
  const gen = ++generation;
  unwatch();
  let path = location.pathname.replace(/\/+$/, '');
  if (path === '/ui' || path === '') {
    history.replaceState(null, '', '/ui/projects');
    path = '/ui/projects';
  }
  if (path !== '/ui/login' && !auth.get()) {
    navigate(`/ui/login?next=${encodeURIComponent(location.pathname + location.search)}`, true);
    return;
  }
  if (path !== '/ui/login' && !session.user) {
    try { await loadSession(); } catch (e) { if (gen === generation) showError(e); return; }
  }
  const found = routes.find(([re]) => re.test(path));
  for (const a of document.querySelectorAll('[data-nav]'))
    if (found && a.dataset.nav === found[2] && path !== '/ui/login') a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  if (!found) {
    clear(main, h('h1', {}, 'Not found'), h('p', {}, `No console page at ${path}.`));
    return;
  }
  const params = path.match(found[0]).slice(1).map(decodeURIComponent);
  const query = new URLSearchParams(location.search);
  clear(main, h('p', { class: 'muted' }, 'Loading…'));
  try {
    await found[1].render(main, params, query, () => gen === generation);
  } catch (e) {
    if (gen === generation) showError(e);
  }
  if (gen === generation) document.dispatchEvent(new CustomEvent('qilin:page', { detail: path }));
}

function showError(e) {
  clear(main, h('h1', {}, 'Cannot show this page'),
    h('p', { class: 'error', role: 'alert' }, e.message, e.code ? ` (${e.code})` : ''));
}

setNavigate((to, replace) => {
  if (replace) history.replaceState(null, '', to); else history.pushState(null, '', to);
  show().then(() => { if (!replace) main.focus({ preventScroll: true }); });
});

setUnauthorizedHandler(() => {
  auth.clear();
  Object.assign(session, { user: '', role: '', writable: false });
  document.getElementById('who').hidden = true;
  if (location.pathname !== '/ui/login')
    navigate(`/ui/login?next=${encodeURIComponent(location.pathname + location.search)}`, true);
});

// Links marked data-link navigate inside the app; modified clicks keep the browser's meaning.
document.addEventListener('click', (ev) => {
  const a = ev.target.closest('a[data-link]');
  if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  ev.preventDefault();
  navigate(a.getAttribute('href'));
});
window.addEventListener('popstate', show);
document.getElementById('logout').addEventListener('click', () => {
  auth.clear();
  Object.assign(session, { user: '', role: '', writable: false });
  document.getElementById('who').hidden = true;
  navigate('/ui/login', true);
});
show();
