// The job list with Kylin's filters: project, status, type, time window and a search (a model
// name or a job id prefix). The filters live in the URL, so back and deep links keep them.
import { get, getAll, enc } from '../api.js';
import { h, clear, link, badge, time, duration } from '../dom.js';
import { page, navigate } from '../ui.js';
import { watch } from '../live.js';

const STATUSES = ['PENDING', 'RUNNING', 'ERROR', 'FINISHED', 'STOPPED', 'DISCARDED'];
const TYPES = ['INC_BUILD', 'INDEX_MERGE', 'INDEX_REFRESH', 'INDEX_BUILD'];
const WINDOWS = [['4', 'all time'], ['0', 'last day'], ['1', 'last 7 days'], ['2', 'last 30 days'], ['3', 'last year']];
const PAGE = 20;

export async function render(main, params, query, current) {
  const q = {
    project: query.get('project') || '', statuses: (query.get('status') || '').split(',').filter(Boolean),
    types: (query.get('type') || '').split(',').filter(Boolean), time: query.get('time') || '4',
    key: query.get('key') || '', page: Math.max(0, Number(query.get('page')) || 0),
  };
  const projects = await getAll('/projects', {});
  const go = (changes) => {
    const n = { ...q, page: 0, ...changes };
    const u = new URLSearchParams();
    if (n.project) u.set('project', n.project);
    if (n.statuses.length) u.set('status', n.statuses.join(','));
    if (n.types.length) u.set('type', n.types.join(','));
    if (n.time !== '4') u.set('time', n.time);
    if (n.key) u.set('key', n.key);
    if (n.page) u.set('page', n.page);
    navigate(`/ui/jobs${u.toString() ? `?${u}` : ''}`);
  };
  const project = h('select', { id: 'f-project', onchange: (e) => go({ project: e.target.value }) },
    h('option', { value: '' }, 'every project'), projects.map((p) => h('option', { value: p.name, selected: p.name === q.project }, p.name)));
  const checks = (id, legend, values, chosen, key) => h('fieldset', { id }, h('legend', {}, legend), values.map((v) =>
    h('label', {}, h('input', { type: 'checkbox', value: v, checked: chosen.includes(v), onchange: (e) => {
      const set = new Set(chosen);
      if (e.target.checked) set.add(v); else set.delete(v);
      go({ [key]: [...set] });
    } }), v)));
  const windowSel = h('select', { id: 'f-time', onchange: (e) => go({ time: e.target.value }) },
    WINDOWS.map(([v, l]) => h('option', { value: v, selected: v === q.time }, l)));
  const key = h('input', { id: 'f-key', type: 'search', value: q.key, placeholder: 'model or job id' });
  const search = h('form', { class: 'form', role: 'search', onsubmit: (e) => { e.preventDefault(); go({ key: key.value.trim() }); } },
    h('label', {}, 'Model or job id', key), h('button', { type: 'submit' }, 'Search'));
  const list = h('div');
  clear(main, page('Jobs'), h('h1', {}, 'Jobs'), h('div', { class: 'card filters' },
    h('label', {}, 'Project', project), checks('f-status', 'Status', STATUSES, q.statuses, 'statuses'),
    checks('f-type', 'Type', TYPES, q.types, 'types'), h('label', {}, 'Created', windowSel), search), list);

  const load = async () => {
    const d = await get('/jobs', { project: q.project, statuses: q.statuses, job_names: q.types,
      time_filter: q.time === '4' ? undefined : q.time, key: q.key, page_offset: q.page, page_size: PAGE });
    if (!current()) return;
    const pages = Math.max(1, Math.ceil(d.total_size / PAGE));
    const rows = d.value.map((j) => h('tr', { dataset: { job: j.id, status: j.job_status } },
      h('td', {}, link(`/ui/jobs/${enc(j.id)}?project=${enc(j.project)}`, h('span', { class: 'mono small hide-narrow' }, j.id),
        h('span', { class: 'mono small show-narrow', title: j.id }, `…${j.id.slice(-8)}`))),
      h('td', {}, j.job_name), h('td', {}, badge(j.job_status)),
      h('td', { class: 'hide-narrow' }, j.project),
      h('td', {}, j.target_subject ? link(`/ui/projects/${enc(j.project)}/models/${enc(j.target_subject)}`, j.target_subject) : '–'),
      h('td', { class: 'mono hide-narrow' }, j.data_range_end ? `${time(j.data_range_start, 'UTC', false)} → ${time(j.data_range_end, 'UTC', false)}` : '–'),
      h('td', { class: 'mono' }, time(j.create_time, 'UTC')), h('td', { class: 'num' }, duration(j.duration)),
      h('td', { class: 'hide-narrow' }, j.submitter)));
    clear(list, h('p', { id: 'jobs-total' }, `${d.total_size} job(s)`), h('div', { class: 'scroll' }, h('table', { id: 'jobs' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Job'), h('th', {}, 'Type'), h('th', {}, 'Status'), h('th', { class: 'hide-narrow' }, 'Project'),
        h('th', {}, 'Model'), h('th', { class: 'hide-narrow' }, 'Range (UTC)'), h('th', {}, 'Created (UTC)'), h('th', { class: 'num' }, 'Duration'),
        h('th', { class: 'hide-narrow' }, 'Submitter'))),
      h('tbody', {}, rows))),
    h('nav', { class: 'pager', 'aria-label': 'Pages' },
      h('button', { type: 'button', id: 'prev', disabled: q.page ? undefined : true, onclick: () => go({ page: q.page - 1 }) }, '← Newer'),
      h('span', { id: 'page-of' }, `page ${q.page + 1} of ${pages}`),
      h('button', { type: 'button', id: 'next', disabled: q.page + 1 < pages ? undefined : true, onclick: () => go({ page: q.page + 1 }) }, 'Older →')));
  };
  await load();
  watch(q.project ? { project: q.project } : {}, load);
}
