// Every project: its time zone, its automatic-build switch, its models.
import { getAll, enc } from '../api.js';
import { h, clear, link, time } from '../dom.js';
import { page } from '../ui.js';
import { watch } from '../live.js';
import { autoSwitch, projectZone } from './common.js';

export async function render(main, params, query, current) {
  const body = h('div');
  clear(main, page('Projects'), h('h1', {}, 'Projects'), body);
  const load = async () => {
    const [projects, models] = await Promise.all([getAll('/projects', {}), getAll('/models', {})]);
    if (!current()) return;
    const count = {};
    for (const m of models) count[m.project] = (count[m.project] || 0) + 1;
    const rows = projects.map((p) => h('tr', { dataset: { project: p.name } },
      h('td', {}, link(`/ui/projects/${enc(p.name)}`, p.name)),
      h('td', { class: 'hide-narrow' }, p.description),
      h('td', {}, projectZone(p)),
      h('td', {}, autoSwitch(p, load)),
      h('td', { class: 'num' }, count[p.name] || 0),
      h('td', { class: 'hide-narrow' }, time(p.last_modified, projectZone(p), false))));
    clear(body, projects.length ? h('div', { class: 'scroll' }, h('table', { id: 'projects' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Project'), h('th', { class: 'hide-narrow' }, 'Description'),
        h('th', {}, 'Time zone'), h('th', {}, 'Automatic builds'), h('th', { class: 'num' }, 'Models'),
        h('th', { class: 'hide-narrow' }, 'Last modified'))),
      h('tbody', {}, rows))) : h('p', {}, 'No projects yet: create one with qilin project create NAME.'));
  };
  await load();
  watch({}, load);
}
