// Pieces several pages show: the automatic-build switches, a model's schedule, a project's
// time zone.
import { put, enc } from '../api.js';
import { h } from '../dom.js';
import { session, confirmAction, say, sayError } from '../ui.js';

export function projectZone(p) {
  return (p.override_kylin_properties || {})['kylin.web.timezone'] || '';
}

// A switch: a toggle button for users who may act, its state in words for the others.
function toggle(on, label, onchange) {
  const text = on ? 'On' : 'Off';
  if (!session.writable) return h('span', { class: 'muted', 'aria-label': `${label}: ${text}` }, text);
  return h('button', { type: 'button', 'aria-pressed': on ? 'true' : 'false', 'aria-label': label,
    'data-action': 'toggle', onclick: onchange }, text);
}

export function autoSwitch(p, reload) {
  const on = p.auto_segment_build_enabled;
  return toggle(on, `Automatic builds of project ${p.name}`, async () => {
    const verb = on ? 'Turn off' : 'Turn on';
    if (!await confirmAction(`${verb} automatic builds`, `${verb} automatic segment builds of every model of project ${p.name}?`, verb)) return;
    try {
      await put(`/projects/${enc(p.name)}/segment_config`, { auto_segment_build_enabled: !on });
      say(`Automatic builds of ${p.name} are ${on ? 'off' : 'on'}.`, true);
      await reload();
    } catch (e) { sayError(e, `${verb} automatic builds of ${p.name}`); }
  });
}

export function modelSwitch(m, reload) {
  const a = (m.segment_config || {}).auto_segment_build;
  const on = !!(a && a.enabled);
  if (!a) return h('span', { class: 'muted' }, 'not configured');
  return toggle(on, `Automatic builds of model ${m.name}`, async () => {
    const verb = on ? 'Turn off' : 'Turn on';
    if (!await confirmAction(`${verb} automatic builds`, `${verb} automatic builds of model ${m.name}?`, verb)) return;
    try {
      await put(`/models/${enc(m.name)}/segment_config`, { project: m.project, auto_segment_build: { enabled: !on } });
      say(`Automatic builds of ${m.name} are ${on ? 'off' : 'on'}.`, true);
      await reload();
    } catch (e) { sayError(e, `${verb} automatic builds of ${m.name}`); }
  });
}

export function schedule(m) {
  const a = (m.segment_config || {}).auto_segment_build;
  if (!a) return '–';
  return `daily at ${a.trigger_time}, the day ${a.logical_date_offset_days} day(s) before, ${a.data_range_start_time}–${a.data_range_end_time}`;
}
