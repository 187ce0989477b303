// One job: its steps with states, durations, retries and captured output, and its actions.
import { get, enc } from '../api.js';
import { h, clear, link, badge, time, duration, kv } from '../dom.js';
import { page } from '../ui.js';
import { watch } from '../live.js';
import { jobActions } from '../actions.js';

const LIVE = ['PENDING', 'RUNNING'];

export async function render(main, [id], query, current) {
  const body = h('div');
  clear(main, page(`Job ${id.slice(0, 8)}`, link('/ui/jobs', 'Jobs'), ' / ', id), h('h1', {}, 'Job ', h('span', { class: 'mono' }, id)), body);
  const open = new Set(); // steps whose output is shown
  let job = null, lastSig = '', durations = [];
  const pres = new Map(); // step id -> [step, the pre showing its output]

  async function output(step, pre) {
    const d = await get(`/jobs/${enc(id)}/steps/${enc(step.id)}/output`, { project: job.project });
    pre.textContent = d.cmd_output || '(no output)';
  }

  const load = async () => {
    const list = await get('/jobs', { project: query.get('project') || undefined, key: id, page_size: 1 });
    job = list.value.find((j) => j.id === id);
    if (!job) throw new Error(`no job ${id}`);
    const steps = await get(`/jobs/${enc(id)}/detail`, { project: job.project });
    if (!current()) return;
    // Unchanged but for the running durations: update those in place and keep the page as it is.
    const sig = JSON.stringify([job.job_state, job.last_modified, [...open],
      steps.map((s) => [s.step_state, s.attempts, s.exec_start_time, s.exec_end_time, s.failed_msg])]);
    if (sig === lastSig && durations.length) {
      durations[0].textContent = duration(job.duration);
      steps.forEach((s, i) => { if (durations[i + 1]) durations[i + 1].textContent = duration(s.duration); });
      for (const [step, pre] of pres.values()) if (step.step_status === 'RUNNING') await output(step, pre).catch(() => {});
      return;
    }
    lastSig = sig;
    pres.clear();
    durations = [h('span', {}, duration(job.duration))];
    const rows = steps.map((s) => {
      const pre = h('pre', { class: 'out', id: `out-${s.sequence_id}` });
      const shown = open.has(s.id);
      const toggle = h('button', { type: 'button', 'aria-expanded': shown ? 'true' : 'false', 'aria-controls': `out-${s.sequence_id}`,
        onclick: async () => { if (open.has(s.id)) open.delete(s.id); else open.add(s.id); await load(); } }, shown ? 'Hide output' : 'Output');
      if (shown) {
        pres.set(s.id, [s, pre]);
        output(s, pre).catch((e) => { pre.textContent = e.message; });
      }
      return [h('tr', { dataset: { step: s.id, status: s.step_status } },
        h('td', { class: 'num' }, s.sequence_id), h('td', {}, s.name), h('td', {}, badge(s.step_status)),
        h('td', { class: 'hide-narrow' }, s.kind), h('td', { class: 'mono' }, time(s.exec_start_time, 'UTC')),
        h('td', { class: 'num' }, durations[durations.push(h('span', {}, duration(s.duration))) - 1]),
        h('td', { class: 'num' }, s.attempts > 1 ? `${s.attempts - 1} retr${s.attempts > 2 ? 'ies' : 'y'}` : s.attempts ? 'none' : '–'),
        h('td', {}, s.failed_msg || ''), h('td', {}, toggle)),
      shown ? h('tr', {}, h('td', { colspan: '9' }, pre)) : null];
    });
    clear(body, h('div', { class: 'card' }, kv([
      ['Type', job.job_name], ['Status', h('span', { id: 'job-status' }, badge(job.job_status), ` (${job.job_state})`)],
      ['Project', job.project],
      ['Model', job.target_subject ? link(`/ui/projects/${enc(job.project)}/models/${enc(job.target_subject)}`, job.target_subject) : '–'],
      ['Range (UTC)', job.data_range_end ? `${time(job.data_range_start, 'UTC')} → ${time(job.data_range_end, 'UTC')}` : '–'],
      ['Submitter', job.submitter], ['Priority', job.priority],
      ['Created (UTC)', time(job.create_time, 'UTC')], ['Started', time(job.exec_start_time, 'UTC')],
      ['Ended', time(job.exec_end_time, 'UTC')], ['Duration', durations[0]],
    ]), h('div', { class: 'toolbar', id: 'job-actions' }, jobActions(job, load))),
    h('h2', {}, 'Steps'), h('div', { class: 'scroll' }, h('table', { id: 'steps' },
      h('thead', {}, h('tr', {}, h('th', { class: 'num' }, '#'), h('th', {}, 'Step'), h('th', {}, 'Status'), h('th', { class: 'hide-narrow' }, 'Kind'),
        h('th', {}, 'Started (UTC)'), h('th', { class: 'num' }, 'Duration'), h('th', { class: 'num' }, 'Retries'), h('th', {}, 'Failure'), h('th', {}, 'Log'))),
      h('tbody', {}, rows))),
    h('p', { class: 'muted' }, 'Output is what the store keeps of each step (its last part); the full log is under logs/ in the data directory of the server that ran the step.'));
  };
  await load();
  watch({ project: job.project }, load, async () => { if (job && LIVE.includes(job.job_status)) await load(); });
}
