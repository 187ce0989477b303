// A model: the dispatcher's latest decision ("why not built?"), its schedule, and the segment
// timeline with the live job of a segment and manual build, merge and refresh.
import { get, post, put, enc } from '../api.js';
import { h, clear, link, badge, time, kv } from '../dom.js';
import { page, actionButton, confirmAction, say, sayError, session } from '../ui.js';
import { watch } from '../live.js';
import { Timeline, SPANS, swatch } from '../timeline.js';
import { parseLocal, toLocal } from '../zone.js';
import { modelSwitch, schedule } from './common.js';

async function allSegments(project, model) {
  const path = `/models/${enc(model)}/segments`;
  const size = 1000;
  const first = await get(path, { project, page_size: size, page_offset: 0 });
  const pages = Math.ceil(first.total_size / size);
  const rest = await Promise.all(Array.from({ length: Math.max(pages - 1, 0) }, (_, i) =>
    get(path, { project, page_size: size, page_offset: i + 1 })));
  return first.value.concat(...rest.map((d) => d.value));
}

function decisionCard(d, m, zone, reload) {
  const rel = d.related_segments || [];
  return h('section', { class: 'card', id: 'decision', 'aria-labelledby': 'decision-h' },
    h('h2', { id: 'decision-h' }, 'Automatic builds: the latest decision'),
    kv([
      ['State', badge(d.state)],
      ['Target range', d.target_end ? `${time(d.target_start, zone)} → ${time(d.target_end, zone)}` : '–'],
      ['Reason', d.reason || '–'],
      d.message && d.message !== d.reason ? ['Message', d.message] : null,
      ['Related segments', d.from_cache ? 'not listed: the cycle was complete at an earlier scan (the cycle cache)' : rel.length ? h('span', { class: 'mono' }, rel.join(', '), d.related_segments_count > rel.length ? ` (+${d.related_segments_count - rel.length})` : '') : '–'],
      d.job_id ? ['Job', link(`/ui/jobs/${enc(d.job_id)}?project=${enc(d.project)}`, d.job_id)] : null,
      ['Evaluated at', time(d.evaluated_at, zone)],
      ['Next trigger', time(d.next_trigger, zone)],
      ['Schedule', schedule(m)],
      ['Model switch', modelSwitch(m, reload)],
      ['Time zone', zone],
    ]));
}

export async function render(main, [project, name], query, current) {
  const decision = h('div');
  const tlCard = h('section', { class: 'card', 'aria-labelledby': 'tl-h' });
  const panel = h('section', { class: 'card', id: 'selection', 'aria-live': 'polite', 'aria-labelledby': 'sel-h' });
  const table = h('section', { class: 'card', 'aria-labelledby': 'segs-h' });
  clear(main, page(name, link('/ui/projects', 'Projects'), ' / ', link(`/ui/projects/${enc(project)}`, project), ' / ', name),
    h('h1', {}, `Model ${name}`), decision, tlCard, panel, table);

  let model = null, zone = 'UTC', segs = [], chosen = [], gap = null, ticks = 0, jobTimer = 0;
  const canvas = h('canvas', { id: 'timeline', tabindex: '0', role: 'application', 'aria-roledescription': 'segment timeline',
    'aria-label': 'Segment timeline. Left and right arrows move between segments, plus and minus zoom, Page Up and Page Down pan, Space adds a segment to the selection, Escape clears it.' });
  const tip = h('div', { class: 'tip', hidden: true, id: 'tl-tip' });
  const summary = h('p', { id: 'tl-summary' });
  const zoomBar = h('div', { class: 'toolbar zoom', role: 'group', 'aria-label': 'Zoom' });
  const tl = new Timeline(canvas, {
    zone,
    onHover: (s, x, y, g) => {
      if (!s && !g) { tip.hidden = true; return; }
      tip.textContent = s ? `${s.status} ${time(s.start, zone)} → ${time(s.end, zone)}${s.job_id ? ` · job ${s.job_id.slice(0, 13)}…` : ''}`
        : `gap ${time(g.start, zone)} → ${time(g.end, zone)} (click to build)`;
      tip.hidden = false;
      tip.style.left = `${Math.min(x + 12, canvas.clientWidth - 220)}px`;
      tip.style.top = `${y + 14}px`;
    },
    onSelect: (s, all, g) => { chosen = all; gap = g || null; showPanel(); },
    onView: () => { if (segs.length) showTable(); },
  });

  for (const [label, span] of Object.entries(SPANS)) {
    zoomBar.append(h('button', { type: 'button', 'aria-pressed': label === 'All' ? 'true' : 'false', dataset: { zoom: label },
      onclick: (e) => {
        for (const b of zoomBar.querySelectorAll('[data-zoom]')) b.setAttribute('aria-pressed', b === e.currentTarget ? 'true' : 'false');
        const sel = tl.segs[tl.cursor];
        tl.zoomTo(span, sel ? (sel.start + sel.end) / 2 : undefined);
      } }, label));
  }
  const goto = h('input', { type: 'date', id: 'tl-goto', 'aria-label': 'Go to date' });
  zoomBar.append(h('button', { type: 'button', 'aria-label': 'Earlier', onclick: () => tl.pan(-0.5) }, '◀ Earlier'),
    h('button', { type: 'button', 'aria-label': 'Later', onclick: () => tl.pan(0.5) }, 'Later ▶'),
    h('form', { class: 'form', onsubmit: (e) => {
      e.preventDefault();
      const t = parseLocal(goto.value, zone);
      if (!Number.isNaN(t)) tl.center(t + 12 * 3600e3);
    } }, goto, h('button', { type: 'submit', id: 'tl-go' }, 'Go')));
  const legend = h('div', { class: 'legend', 'aria-hidden': 'true' },
    ['READY', 'WARNING', 'NEW', 'GAP'].map((s) => h('span', {}, swatch(s), s === 'GAP' ? 'gap (no segment)'
      : s === 'NEW' ? 'NEW, N (building; a refresh or merge sits above its sources)' : `${s}, ${s[0]}`)));
  clear(tlCard, h('h2', { id: 'tl-h' }, 'Segments'), zoomBar, legend, h('div', { class: 'tl' }, canvas, tip), summary);

  function showTable() {
    const inView = [];
    for (const s of tl.segs) if (s.end > tl.t0 && s.start < tl.t1) { inView.push(s); if (inView.length >= 50) break; }
    clear(table, h('h2', { id: 'segs-h' }, 'Segments in view'),
      h('p', { class: 'muted' }, inView.length >= 50 ? 'The first 50 in view; zoom in for others.' : `${inView.length} in view.`),
      h('div', { class: 'scroll' }, h('table', { id: 'segments' },
        h('thead', {}, h('tr', {}, h('th', {}, h('span', { class: 'sr' }, 'Select')), h('th', {}, 'Status'), h('th', {}, `Start (${zone})`), h('th', {}, 'End'), h('th', { class: 'hide-narrow' }, 'Name'), h('th', {}, 'Job'))),
        h('tbody', {}, inView.map((s) => h('tr', { dataset: { segment: s.id }, class: chosen.some((c) => c.id === s.id) ? 'sel' : '' },
          h('td', {}, h('input', { type: 'checkbox', 'aria-label': `Select ${s.name}`, checked: chosen.some((c) => c.id === s.id),
            onchange: () => tl.selectId(s.id, true) })),
          h('td', {}, badge(s.status)), h('td', { class: 'mono' }, time(s.start, zone)), h('td', { class: 'mono' }, time(s.end, zone)),
          h('td', { class: 'mono hide-narrow' }, s.name),
          h('td', {}, s.job_id ? link(`/ui/jobs/${enc(s.job_id)}?project=${enc(project)}`, h('span', { class: 'mono small', title: s.job_id }, `…${s.job_id.slice(-8)}`)) : '–')))))));
  }

  async function liveJob(s) {
    if (!s.job_id) return h('p', {}, 'No job recorded for this segment.');
    const d = await get('/jobs', { project, key: s.job_id, page_size: 1 });
    const j = d.value[0];
    if (!j) return h('p', {}, `Job ${s.job_id} is no longer in the store.`);
    return h('div', { id: 'segment-job' }, kv([
      ['Job', link(`/ui/jobs/${enc(j.id)}?project=${enc(project)}`, `${j.job_name} ${j.id}`)],
      ['Status', badge(j.job_status)],
      ['Created', time(j.create_time, zone)],
      ['Duration', `${Math.round(j.duration / 1000)} s`],
    ]));
  }

  async function act(what, fn) {
    try {
      const d = await fn();
      const ids = (d && d.jobs || []).map((j) => j.job_id).join(', ');
      say(`${what}: submitted ${ids}`, true);
      await load();
    } catch (e) { sayError(e, what); }
  }

  function buildForm() {
    if (!session.writable) return null;
    const start = h('input', { type: 'datetime-local', id: 'build-start', required: true });
    const end = h('input', { type: 'datetime-local', id: 'build-end', required: true });
    if (gap) { start.value = toLocal(gap.start, zone); end.value = toLocal(gap.end, zone); }
    return h('form', { class: 'form', id: 'build-form', onsubmit: async (e) => {
      e.preventDefault();
      const a = parseLocal(start.value, zone), b = parseLocal(end.value, zone);
      if (!(a < b)) { say('Build: the start must be before the end.'); return; }
      if (!await confirmAction('Build a segment', `Build ${name} from ${time(a, zone)} to ${time(b, zone)} (${zone})?`, 'Build')) return;
      await act('Build', () => post(`/models/${enc(name)}/segments`, { project, start: String(a), end: String(b) }));
    } }, h('label', {}, `Start (${zone})`, start), h('label', {}, `End (${zone})`, end),
    h('button', { type: 'submit', class: 'primary', 'data-action': 'Build' }, 'Build'));
  }

  async function showPanel() {
    const s = chosen[chosen.length - 1];
    const built = chosen.filter((x) => x.status !== 'NEW');
    const acts = h('div', { class: 'toolbar' },
      actionButton('Refresh', async () => {
        if (!await confirmAction('Refresh', `Refresh ${built.length} segment(s) of ${name}?`, 'Refresh')) return;
        await act('Refresh', () => put(`/models/${enc(name)}/segments`, { project, type: 'REFRESH', ids: built.map((x) => x.id) }));
      }, { disabled: built.length ? undefined : true }),
      actionButton('Merge', async () => {
        if (!await confirmAction('Merge', `Merge ${built.length} segments of ${name} into one?`, 'Merge')) return;
        await act('Merge', () => put(`/models/${enc(name)}/segments`, { project, type: 'MERGE', ids: built.map((x) => x.id) }));
      }, { disabled: built.length >= 2 ? undefined : true }));
    const head = h('h2', { id: 'sel-h' }, s ? (chosen.length > 1 ? `${chosen.length} segments selected` : `Segment ${s.name}`) : gap ? 'A gap' : 'Selection');
    if (!s) {
      clear(panel, head, gap ? h('p', {}, `No segment covers ${time(gap.start, zone)} → ${time(gap.end, zone)}.`) :
        h('p', { class: 'muted' }, 'Click a bar (Shift-click for several, to merge), or a gap to build it; or use the arrow keys on the timeline.'), buildForm());
      return;
    }
    clear(panel, head, kv([
      ['Status', badge(s.status)],
      ['Range', `${time(s.start, zone)} → ${time(s.end, zone)}`],
      ['Id', h('span', { class: 'mono' }, s.id)],
      ['Built', time(s.last_build_time, zone)],
    ]), h('h3', {}, 'Its job'), h('p', { class: 'muted' }, 'Loading…'), acts, buildForm());
    showTable();
    // Looked up once the selection rests (arrow keys held down move through many segments).
    clearTimeout(jobTimer);
    jobTimer = setTimeout(async () => {
      try {
        const j = await liveJob(s);
        if (current() && chosen[chosen.length - 1]?.id === s.id) panel.querySelector('h3 + p')?.replaceWith(j);
      } catch (e) { sayError(e, 'The segment\'s job'); }
    }, 200);
  }

  async function load() {
    const [models, d, all] = await Promise.all([
      get('/models', { project, model_name: name, exact: 'true' }),
      get(`/models/${enc(name)}/auto_segment_build/status`, { project }),
      allSegments(project, name),
    ]);
    if (!current()) return;
    model = models.value[0];
    if (!model) throw new Error(`no model ${name} in project ${project}`);
    zone = d.timezone || 'UTC';
    tl.zone = zone;
    clear(decision, decisionCard(d, model, zone, load));
    const first = !segs.length;
    segs = all;
    tl.setData(segs, first);
    canvas.dataset.layoutMs = tl.layoutMs.toFixed(2);
    const by = {};
    for (const s of segs) by[s.status] = (by[s.status] || 0) + 1;
    summary.textContent = `${segs.length} segments: ${Object.entries(by).map(([k, v]) => `${v} ${k}`).join(', ') || 'none'}; ${tl.gaps.length} gap(s).`;
    chosen = chosen.map((c) => segs.find((x) => x.id === c.id)).filter(Boolean);
    showTable();
    if (first || chosen.length || gap) showPanel();
  }

  async function refreshDecision() {
    if (++ticks % 5) return;
    const d = await get(`/models/${enc(name)}/auto_segment_build/status`, { project });
    if (current() && model) clear(decision, decisionCard(d, model, zone, load));
  }

  await load();
  watch({ project, model: name }, load, refreshDecision);
}
