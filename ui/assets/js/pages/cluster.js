// The cluster as this server sees it: itself, the master, the fencing epoch, the store.
import { get } from '../api.js';
import { h, clear, badge, kv, bytes, time } from '../dom.js';
import { page } from '../ui.js';
import { watch } from '../live.js';

export async function render(main, params, query, current) {
  const body = h('div');
  clear(main, page('Cluster'), h('h1', {}, 'Cluster'), body);
  const load = async () => {
    const d = await get('/cluster');
    if (!current()) return;
    const s = d.store || {};
    const used = s.map_size ? Math.round((100 * s.used_bytes) / s.map_size) : null;
    const meter = s.map_size ? h('meter', { id: 'store-meter', min: '0', max: String(s.map_size), value: String(s.used_bytes),
      high: String(s.map_size * 0.8), optimum: '0', 'aria-label': 'store used' }) : null;
    clear(body, h('div', { class: 'grid' },
      h('section', { class: 'card', id: 'this-server' }, h('h2', {}, 'This server'), kv([
        ['Id', d.server.id], ['Role', badge(d.server.role.toUpperCase())], ['Mode', d.server.mode],
        ['Version', d.server.version], ['Scheduler', d.server.scheduler_active ? `running ${d.server.running_jobs} job(s)` : 'not running here'],
        ['Dispatcher', d.server.dispatcher_active ? `${d.server.dispatcher_scans} scans` : 'not running here'],
      ])),
      h('section', { class: 'card', id: 'master' }, h('h2', {}, 'Master'), kv([
        ['Master', d.master.this_server ? `${d.master.holder} (this server)` : d.master.holder || 'unknown from this server'],
        ['Fencing epoch', h('span', { id: 'epoch' }, String(d.fencing_epoch))],
      ])),
      h('section', { class: 'card', id: 'store' }, h('h2', {}, 'Store'), kv([
        ['Backend', s.backend || '–'],
        ['Used', `${bytes(s.used_bytes)}${s.map_size ? ` of ${bytes(s.map_size)} (${used}%)` : ''}`],
        meter ? ['Limit', meter] : null,
        ['File', bytes(s.file_bytes)],
      ])),
      h('section', { class: 'card', id: 'jobs-by-state' }, h('h2', {}, 'Jobs by state'), kv(Object.entries(d.jobs).map(([k, v]) => [badge(k), String(v)]))),
    ), h('section', { class: 'card', 'aria-labelledby': 'servers-h' }, h('h2', { id: 'servers-h' }, 'Servers of this data directory'),
      h('div', { class: 'scroll' }, h('table', { id: 'servers' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Server'), h('th', {}, 'Role'), h('th', {}, 'Address'), h('th', {}, 'Mode'),
          h('th', { class: 'num' }, 'Pid'), h('th', {}, 'Started (UTC)'))),
        h('tbody', {}, (d.servers || []).map((s) => h('tr', { dataset: { server: s.id, role: s.role } },
          h('td', {}, s.id, s.this_server ? ' (this server)' : ''), h('td', {}, badge(s.role.toUpperCase())),
          h('td', { class: 'mono' }, s.address), h('td', {}, s.mode), h('td', { class: 'num' }, String(s.pid)),
          h('td', { class: 'mono' }, time(s.started, 'UTC'))))))),
      h('p', { class: 'muted' }, 'Servers on other hosts (a shared PostgreSQL store) keep data directories of their own: their own Cluster page shows them.')),
    h('p', { class: 'muted' }, `As of ${time(d.now, 'UTC')} UTC.`));
  };
  await load();
  watch({}, load, load);
}
