// Job actions (PUT /jobs/status), each asked for first; a refusal shows the server's message.
import { put } from './api.js';
import { actionButton, confirmAction, say, sayError } from './ui.js';

// Which actions a job's display status allows (docs/user-guide.md, Jobs).
const ALLOWED = {
  PAUSE: ['PENDING', 'RUNNING'],
  RESUME: ['ERROR', 'STOPPED'],
  RESTART: ['RUNNING', 'ERROR', 'STOPPED'],
  DISCARD: ['PENDING', 'RUNNING', 'ERROR', 'STOPPED'],
};
const WHAT = {
  PAUSE: 'stops its running step; it can be resumed',
  RESUME: 'continues from the failed or paused step',
  RESTART: 'runs every step again',
  DISCARD: 'ends it for good and removes its NEW segment',
};

export function jobActions(job, done) {
  return Object.keys(ALLOWED).map((action) => actionButton(action, async () => {
    if (!await confirmAction(`${action} job`, `${action} ${job.job_name} job ${job.id}? This ${WHAT[action]}.`, action)) return;
    try {
      await put('/jobs/status', { project: job.project, job_ids: [job.id], action });
      say(`${action}: job ${job.id} done.`, true);
    } catch (e) {
      sayError(e, `${action} refused`);
    }
    await done();
  }, { class: action === 'DISCARD' ? 'danger' : undefined,
    // Offered when the state allows it; the server decides anyway (its refusal is shown).
    disabled: ALLOWED[action].includes(job.job_status) ? undefined : true }));
}
