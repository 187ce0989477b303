// A project's models with their automatic builds and the dispatcher's latest decision.
import { get, getAll, enc } from '../api.js';
import { h, clear, link, badge, time, kv } from '../dom.js';
import { page } from '../ui.js';
import { watch } from '../live.js';
import { autoSwitch, modelSwitch, schedule, projectZone } from './common.js';

const MAX_DECISIONS = 100;

export async function render(main, [name], query, current) {
  const head = h('div');
  const body = h('div');
  clear(main, page(name, link('/ui/projects', 'Projects'), ' / ', name), h('h1', {}, `Project ${name}`), head, body);
  const load = async () => {
    const projects = await get('/projects', { project: name, page_size: 1000 });
    const p = projects.value.find((x) => x.name === name);
    if (!p) throw new Error(`no project ${name}`);
    const models = await getAll('/models', { project: name });
    const decisions = await Promise.all(models.slice(0, MAX_DECISIONS).map((m) =>
      get(`/models/${enc(m.name)}/auto_segment_build/status`, { project: name }).catch(() => null)));
    if (!current()) return;
    const zone = (decisions.find(Boolean) || {}).timezone || projectZone(p) || 'UTC';
    clear(head, h('div', { class: 'card' }, kv([
      ['Time zone', zone],
      ['Automatic builds', autoSwitch(p, load)],
      ['Description', p.description || '–'],
      ['Jobs', link(`/ui/jobs?project=${enc(name)}`, `Jobs of ${name}`)],
    ])));
    const rows = models.map((m, i) => {
      const d = decisions[i];
      return h('tr', { dataset: { model: m.name } },
        h('td', {}, link(`/ui/projects/${enc(name)}/models/${enc(m.name)}`, m.name)),
        h('td', {}, badge(m.status)),
        h('td', {}, modelSwitch(m, load)),
        h('td', { class: 'hide-narrow' }, schedule(m)),
        h('td', {}, d ? badge(d.state, d.message || d.reason) : '–'),
        h('td', { class: 'hide-narrow mono' }, d && d.target_end ? `${time(d.target_start, zone, false)} → ${time(d.target_end, zone, false)}` : '–'),
        h('td', { class: 'hide-narrow' }, d ? d.reason || d.message || '–' : '–'),
        h('td', { class: 'mono' }, d ? time(d.next_trigger, zone) : '–'));
    });
    clear(body, h('h2', {}, `Models (${models.length})`), models.length ? h('div', { class: 'scroll' }, h('table', { id: 'models' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Model'), h('th', {}, 'Status'), h('th', {}, 'Automatic builds'),
        h('th', { class: 'hide-narrow' }, 'Schedule'), h('th', {}, 'Latest decision'), h('th', { class: 'hide-narrow' }, 'Target range'),
        h('th', { class: 'hide-narrow' }, 'Reason'), h('th', {}, `Next trigger (${zone})`))),
      h('tbody', {}, rows))) : h('p', {}, 'No models yet.'),
      models.length > MAX_DECISIONS ? h('p', { class: 'muted' }, `Decisions are shown for the first ${MAX_DECISIONS} models.`) : null);
  };
  await load();
  watch({ project: name }, load);
}
