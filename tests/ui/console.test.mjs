// The web console in a real browser (docs/user-guide.md, "Web console"; docs/testing.md):
// headless Chromium from Debian, driven by puppeteer-core, against the real qilind on a store
// that ui_seed fills with 10,000 segments. Each check prints "ok N - what" or "not ok N - what";
// the last line is "N passed, M failed". Exit 77 (a skip for ctest) when node modules or
// Chromium are missing, except with CI=true, where that is a failure.
//
//   node tests/ui/console.test.mjs --build BUILD_DIR --source SOURCE_DIR
// Screenshots of every page at two window sizes go to BUILD_DIR/tests/ui-screenshots/.
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

const arg = (name) => { const i = process.argv.indexOf(name); return i > 0 ? process.argv[i + 1] : undefined; };
const build = arg('--build'), source = arg('--source');
const CHROMIUM = process.env.QL_CHROMIUM || '/usr/bin/chromium';
const ci = process.env.CI === 'true';
const RENDER_BUDGET_MS = 200, LIVE_BUDGET_MS = 2000, SEGMENTS = 10000;

function missing(what) {
  console.log(`${ci ? 'FAIL' : 'SKIP'}: ${what} (run scripts/setup.sh)`);
  process.exit(ci ? 1 : 77);
}
if (!build || !source) { console.log('usage: console.test.mjs --build DIR --source DIR'); process.exit(2); }
if (!existsSync(CHROMIUM)) missing(`no Chromium at ${CHROMIUM}`);
let puppeteer;
try {
  puppeteer = (await import(join(source, 'tests/ui/node_modules/puppeteer-core/lib/esm/puppeteer/puppeteer-core.js'))).default;
} catch (e) { missing(`puppeteer-core is not installed in tests/ui/node_modules (${e.message})`); }

// ---- results ----
let passed = 0, failed = 0;
const figures = {};
function check(cond, what, detail) {
  if (cond) { passed++; console.log(`ok ${passed + failed} - ${what}`); }
  else { failed++; console.log(`not ok ${passed + failed} - ${what}${detail ? `: ${detail}` : ''}`); }
  return cond;
}
async function until(what, fn, ms = 10000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms (last: ${last && last.message ? last.message : last})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// ---- the server ----
const tmp = mkdtempSync(join(process.env.TMPDIR || tmpdir(), 'ql_ui_console-'));
const data = join(tmp, 'data');
const shots = join(build, 'tests', 'ui-screenshots');
mkdirSync(shots, { recursive: true });
let server = null, browser = null;

function hash(pw) {
  return execFileSync(join(build, 'tools/qilin'), ['passwd'], { input: `${pw}\n` }).toString().trim();
}
const ADMIN = ['admin', 'admin-pw-1'], VIEWER = ['viewer', 'viewer-pw-1'];

async function startServer() {
  execFileSync(join(build, 'tests/ui_seed'), ['--data', data, '--templates', join(source, 'tests/ui/jobs.yaml'), '--segments', String(SEGMENTS)], { stdio: 'inherit' });
  const users = `${ADMIN[0]}:${hash(ADMIN[1])}:ADMIN;${VIEWER[0]}:${hash(VIEWER[1])}:VIEWER`;
  server = spawn(join(build, 'tools/qilind'), ['--data', data, '--set', 'qilin.server.listen=127.0.0.1:0',
    '--set', `qilin.jobs.templates=${join(source, 'tests/ui/jobs.yaml')}`, '--set', `qilin.server.users=${users}`,
    '--set', 'kylin.job.retry=0', '--set', 'kylin.model.auto-segment-build.dispatcher-interval-ms=500'],
  { cwd: tmp, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  server.stderr.on('data', (b) => { log += b; });
  server.log = () => log;
  const port = await until('qilind listening', () => { const m = /qilind listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log); return m && Number(m[1]); }, 20000);
  return `http://127.0.0.1:${port}`;
}

let base;
const basic = (u) => `Basic ${Buffer.from(`${u[0]}:${u[1]}`).toString('base64')}`;
async function rest(method, path, body, user = ADMIN) {
  const r = await fetch(base + '/kylin/api' + path, { method, headers: { Authorization: basic(user),
    ...(body ? { 'Content-Type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
  const j = await r.json();
  if (!r.ok) { const e = new Error(`${method} ${path}: ${r.status} ${j.msg}`); e.status = r.status; throw e; }
  return j.data;
}
const jobState = async (id) => (await rest('GET', `/jobs?project=shop&key=${id}&page_size=1`)).value[0]?.job_state;
const DAY = 86400000, D2026 = Date.UTC(2025, 11, 31, 16); // 2026-01-01 00:00 in Asia/Shanghai

// ---- the browser ----
const errors = [];
// Refusals the test provokes on purpose: Chromium logs every failed request as a console error.
const expected = [];
async function newPage(context) {
  const page = await context.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error' && !expected.some((re) => re.test(m.text()))) errors.push(`${page.url()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`${page.url()}: ${e.message}`));
  page.on('requestfailed', (r) => errors.push(`${r.url()}: ${r.failure()?.errorText}`));
  await page.setViewport({ width: 1280, height: 900 });
  return page;
}
async function login(page, user) {
  await page.goto(`${base}/ui/projects`);
  await page.waitForSelector('#password');
  await page.$eval('#user', (el) => { el.value = ''; });
  await page.type('#user', user[0]);
  await page.type('#password', user[1]);
  await Promise.all([page.waitForSelector('#projects'), page.click('button[type=submit]')]);
}
async function shot(page, name) {
  const pageErrors = errors.length;
  await page.setViewport({ width: 1280, height: 900 });
  await page.evaluate(() => window.scrollTo(0, 0));
  await new Promise((r) => setTimeout(r, 150));
  await page.screenshot({ path: join(shots, `${name}-wide.png`), fullPage: false });
  await page.setViewport({ width: 420, height: 860 });
  await new Promise((r) => setTimeout(r, 150));
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: join(shots, `${name}-narrow.png`), fullPage: false });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  check(overflow <= 1, `${name}: no horizontal scrolling of the page at 420 px`, `${overflow} px too wide`);
  await page.setViewport({ width: 1280, height: 900 });
  return pageErrors;
}
async function go(page, path, selector) {
  await page.goto(base + path);
  await page.waitForSelector(selector, { timeout: 15000 });
}
async function confirm(page) {
  await page.waitForSelector('#confirm[open]');
  await page.click('#confirm-ok');
  await page.waitForFunction(() => !document.getElementById('confirm').open);
}
const text = (page, sel) => page.$eval(sel, (el) => el.textContent);

async function run() {
  base = await startServer();
  // A schedule for orders (covered: every day up to 2027 is built), a running, a failed and a
  // paused job.
  await rest('PUT', '/models/orders/segment_config', { project: 'shop', auto_segment_build: { enabled: true,
    trigger_time: '01:00:00', logical_date_offset_days: 1, data_range_start_time: '00:00:00', data_range_end_time: '24:00:00' } });
  await rest('PUT', '/projects/shop/segment_config', { auto_segment_build_enabled: true });
  const running = (await rest('POST', '/models/live/segments', { project: 'shop', start: D2026, end: D2026 + DAY })).jobs[0].job_id;
  const paused = (await rest('POST', '/models/live/segments', { project: 'shop', start: D2026 + DAY, end: D2026 + 2 * DAY })).jobs[0].job_id;
  const failing = (await rest('POST', '/models/broken/segments', { project: 'shop', start: D2026, end: D2026 + DAY })).jobs[0].job_id;
  await until('jobs running and failed', async () => await jobState(running) === 'RUNNING' && await jobState(paused) === 'RUNNING' && await jobState(failing) === 'ERROR');
  await rest('PUT', '/jobs/status', { project: 'shop', job_ids: [paused], action: 'PAUSE' });
  const decision = await until('the dispatcher decided', async () => { const d = await rest('GET', '/models/orders/auto_segment_build/status?project=shop'); return d.state === 'COVERED' && d; });

  const launchArgs = process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : [];
  browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: [...launchArgs, '--disable-gpu', '--no-first-run'] });
  const admin = await browser.createBrowserContext();
  const page = await newPage(admin);

  // A wrong password is refused in the page (no browser prompt: the console sends its own
  // Authorization header with credentials 'omit'), then the login and the projects page.
  await page.goto(`${base}/ui/projects/shop`);
  await page.waitForSelector('#password');
  await page.$eval('#user', (el) => { el.value = ''; });
  await page.type('#user', ADMIN[0]);
  await page.type('#password', 'wrong');
  expected.push(/status of 401 \(Unauthorized\)/);
  await page.click('button[type=submit]');
  await page.waitForFunction(() => /Wrong user name or password/.test(document.getElementById('login-error').textContent));
  check(true, 'login: a wrong password is refused in the page');
  expected.pop();
  await page.$eval('#password', (el) => { el.value = ''; });
  await page.type('#password', ADMIN[1]);
  await Promise.all([page.waitForSelector('#models'), page.click('button[type=submit]')]);
  check(new URL(page.url()).pathname === '/ui/projects/shop', 'login: back to the page asked for');
  await go(page, '/ui/projects', '#projects');
  check((await text(page, '#projects')).includes('shop'), 'projects: shop is listed');
  check((await text(page, '#who-role')) === 'ADMIN', 'the header names the role');
  await shot(page, 'projects');

  // A project's models and the latest decision.
  await go(page, '/ui/projects/shop', '#models tr[data-model="orders"]');
  const row = await text(page, '#models tr[data-model="orders"]');
  check(row.includes('COVERED'), 'project: the decision of orders is COVERED', row);
  check(/Next trigger \(Asia\/Shanghai\)/.test(await text(page, '#models thead')), 'project: times are in the project zone');
  check(/\d{4}-\d\d-\d\d 01:00:00/.test(row), 'project: the next trigger at 01:00:00 local time', row);
  check(await page.$$eval('#models tbody tr', (r) => r.length) === 3, 'project: three models');
  await shot(page, 'project');

  // The model: the decision and the timeline of 10,000 segments.
  const t0 = Date.now();
  await go(page, '/ui/projects/shop/models/orders', '#timeline[data-layout-ms]');
  const loadMs = Date.now() - t0;
  const dec = await text(page, '#decision');
  const now = await rest('GET', '/models/orders/auto_segment_build/status?project=shop');
  check(dec.includes('COVERED') && dec.includes('Asia/Shanghai') && dec.includes('2026-12-') === !!now.target_end &&
    (now.from_cache ? dec.includes('cycle cache') : dec.includes(decision.related_segments[0])), 'model: decision state, zone, target and related segments', dec);
  const summary = await text(page, '#tl-summary');
  check(summary.startsWith(`${SEGMENTS} segments`) && summary.includes('WARNING') && summary.includes('gap'), 'model: every segment, statuses and gaps counted', summary);
  const timing = await page.$eval('#timeline', (c) => ({ layout: Number(c.dataset.layoutMs), render: Number(c.dataset.renderMs), drawn: Number(c.dataset.drawn) }));
  figures.timeline_layout_ms = timing.layout; figures.timeline_render_ms = timing.render; figures.model_page_load_ms = loadMs;
  check(timing.drawn === SEGMENTS, `model: ${SEGMENTS} bars drawn`, String(timing.drawn));
  check(timing.layout + timing.render < RENDER_BUDGET_MS, `model: 10,000 segments laid out and drawn in ${(timing.layout + timing.render).toFixed(1)} ms (< ${RENDER_BUDGET_MS})`);
  // Zooming and panning redraw within the budget too.
  const zooms = [];
  for (const z of ['Year', 'Month', 'Week', 'Day', 'Hour', '10 years', 'All']) {
    await page.click(`[data-zoom="${z}"]`);
    zooms.push(await page.$eval('#timeline', (c) => Number(c.dataset.renderMs)));
  }
  figures.timeline_zoom_max_ms = Math.max(...zooms);
  check(Math.max(...zooms) < RENDER_BUDGET_MS, `model: zoom from years to hours redraws in ${Math.max(...zooms).toFixed(1)} ms at most`);
  await shot(page, 'model');
  // Keyboard: the last segment by End, its live job shown.
  await page.focus('#timeline');
  await page.keyboard.press('End');
  await page.waitForSelector('#segment-job');
  check((await text(page, '#selection')).includes('FINISHED'), 'model: End selects the last segment and shows its job');
  await page.click('[data-zoom="Month"]');
  await shot(page, 'model-month');
  // An action clicked in the console changes the store: refresh the selected segment.
  const lastId = await page.$eval('#selection .mono', (el) => el.textContent);
  await page.click('button[data-action="Refresh"]');
  await confirm(page);
  const refresh = await until('a refresh job in the store', async () => {
    const d = await rest('GET', '/jobs?project=shop&job_names=INDEX_REFRESH&page_size=10');
    return d.value.find((j) => j.target_segments.length) || null;
  });
  check(!!refresh, 'model: Refresh in the console made an INDEX_REFRESH job (REST)', lastId);
  await page.waitForFunction(() => /NEW/.test(document.getElementById('tl-summary').textContent), { timeout: 5000 });
  check(await page.$eval('#timeline', (c) => c.style.height !== '') && (await text(page, '#tl-summary')).includes('1 NEW'),
    'model: the refresh\'s NEW segment appears on the open page');
  await shot(page, 'model-refresh');
  // A refusal is shown with the server's message: merge two segments across a gap.
  const first = (await rest('GET', '/models/orders/segments?project=shop&page_size=1000')).value;
  const [before, after] = [first[998], first[999]]; // the days either side of the first gap
  await page.$eval('#tl-goto', (el, v) => { el.value = v; }, new Date(before.end).toISOString().slice(0, 10));
  await page.click('#tl-go');
  await page.focus('#timeline');
  await page.keyboard.press('Escape');
  await page.waitForSelector(`#segments tr[data-segment="${after.id}"]`);
  await page.click(`#segments tr[data-segment="${before.id}"] input`);
  await page.waitForSelector(`#segments tr.sel[data-segment="${before.id}"]`);
  await page.click(`#segments tr[data-segment="${after.id}"] input`);
  await page.waitForSelector(`#segments tr.sel[data-segment="${after.id}"]`);
  expected.push(/status of 409 \(Conflict\)/);
  await page.click('button[data-action="Merge"]');
  await confirm(page);
  // The banner may still show the refresh's answer: wait for the merge's own.
  await page.waitForFunction(() => !document.getElementById('banner').hidden &&
    /^Merge:/.test(document.getElementById('banner-text').textContent), { timeout: 5000 }).catch(() => {});
  const banner = await text(page, '#banner-text');
  check(/Merge: .*(contiguous|QL-00016)/.test(banner), 'model: a refused merge shows the server\'s message', banner);
  expected.pop();

  // Jobs: filters, paging, steps, actions.
  await go(page, '/ui/jobs?project=shop', '#jobs tbody tr');
  const total = await text(page, '#jobs-total');
  check(/^\d+ job/.test(total) && parseInt(total, 10) >= SEGMENTS, 'jobs: every job counted', total);
  await shot(page, 'jobs');
  await page.click('#f-status input[value="ERROR"]');
  await page.waitForFunction(() => location.search.includes('status=ERROR') && document.querySelector('#jobs tbody tr'));
  await until('the ERROR filter', async () => (await page.$$eval('#jobs tbody tr', (r) => r.map((x) => x.dataset.status))).every((s) => s === 'ERROR'));
  check((await page.$$eval('#jobs tbody tr', (r) => r.map((x) => x.dataset.job))).includes(failing), 'jobs: the status filter shows the failed job');
  await page.goBack();
  await page.waitForFunction(() => !location.search.includes('status=ERROR') && document.querySelectorAll('#jobs tbody tr').length === 20);
  check(true, 'jobs: the back button restores the unfiltered list');
  await page.click('#next');
  await page.waitForFunction(() => document.getElementById('page-of')?.textContent.startsWith('page 2'));
  check(true, 'jobs: paging to page 2');
  await go(page, '/ui/jobs?project=shop&type=INDEX_REFRESH', '#jobs tbody tr');
  check((await page.$$eval('#jobs tbody tr', (r) => r.length)) >= 1 && !(await text(page, '#jobs')).includes('INC_BUILD'), 'jobs: the type filter');
  await go(page, '/ui/jobs?project=shop&key=live', '#jobs tbody tr');
  check((await page.$$eval('#jobs tbody tr', (r) => r.length)) === 2, 'jobs: the search by model');
  // A running job: steps, output, PAUSE through the console.
  await go(page, `/ui/jobs/${running}?project=shop`, '#steps tbody tr');
  check((await text(page, '#steps')).includes('Wait for the warehouse') && (await text(page, '#job-status')).includes('RUNNING'), 'job: steps and state of the running job');
  await page.click('#steps tbody tr button');
  await page.waitForFunction(() => /waiting for data/.test(document.querySelector('pre.out')?.textContent || ''));
  check(true, 'job: a step\'s captured output');
  await shot(page, 'job');
  await page.click('button[data-action="PAUSE"]');
  await confirm(page);
  await until('PAUSE reaches the store', async () => await jobState(running) === 'PAUSED');
  check(true, 'job: PAUSE clicked in the console paused the job (REST)');
  await page.waitForFunction(() => document.getElementById('job-status')?.textContent.includes('STOPPED'));
  check(true, 'job: the console shows it STOPPED');
  // A change made through REST shows within 2 s: a new build appears on the job list.
  await go(page, '/ui/jobs?project=shop', '#jobs tbody tr');
  await new Promise((r) => setTimeout(r, 1200)); // the page has its first token
  // Five builds at different moments of the poll's cycle: each must show within the budget.
  const lags = [];
  for (let i = 0; i < 5; i++) {
    await new Promise((r) => setTimeout(r, 230 * i));
    const t1 = Date.now();
    const added = (await rest('POST', '/models/live/segments', { project: 'shop', start: D2026 + (5 + i) * DAY, end: D2026 + (6 + i) * DAY })).jobs[0].job_id;
    await page.waitForSelector(`#jobs tr[data-job="${added}"]`, { timeout: 5000 });
    lags.push(Date.now() - t1);
  }
  figures.live_update_ms = lags;
  check(Math.max(...lags) < LIVE_BUDGET_MS, `live: builds made through REST listed after ${lags.join(', ')} ms (< ${LIVE_BUDGET_MS})`);

  // The cluster.
  await go(page, '/ui/cluster', '#epoch');
  const cl = await rest('GET', '/cluster');
  check((await text(page, '#epoch')) === String(cl.fencing_epoch) && (await text(page, '#master')).includes('this server'), 'cluster: master and fencing epoch');
  check(!!(await page.$('#store-meter')), 'cluster: the store against its limit');
  check(await page.$$eval('#servers tr[data-role="master"]', (r) => r.length) === 1, 'cluster: the servers of the data directory, one master');
  await shot(page, 'cluster');
  // Deep links and the back button.
  await page.goto(`${base}/ui/projects/shop/models/broken`);
  await page.waitForSelector('#timeline[data-layout-ms]');
  await page.click('a[href="/ui/projects/shop"]');
  await page.waitForSelector('#models');
  await page.goBack();
  await page.waitForFunction(() => location.pathname === '/ui/projects/shop/models/broken' && document.querySelector('#decision'));
  check(true, 'deep link and back button');

  // A read-only user: no actions, and a forged one is refused.
  const vctx = await browser.createBrowserContext();
  const vpage = await newPage(vctx);
  await login(vpage, VIEWER);
  await go(vpage, `/ui/jobs/${failing}?project=shop`, '#steps tbody tr');
  check((await vpage.$$('[data-action]')).length === 0, 'viewer: no action buttons on a failed job');
  await go(vpage, '/ui/projects/shop/models/orders', '#timeline[data-layout-ms]');
  await vpage.focus('#timeline');
  await vpage.keyboard.press('End');
  await vpage.waitForSelector('#segment-job');
  check((await vpage.$$('[data-action], #build-form')).length === 0, 'viewer: no build, merge, refresh or switches on a model');
  await shot(vpage, 'model-viewer');
  expected.push(/status of 403 \(Forbidden\)/);
  const forged = await vpage.evaluate(async (id) => {
    const r = await fetch('/kylin/api/jobs/status', { method: 'PUT', credentials: 'omit',
      headers: { Authorization: `Basic ${sessionStorage.getItem('qilin.auth')}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ project: 'shop', job_ids: [id], action: 'RESUME' }) });
    return { status: r.status, body: await r.json() };
  }, failing);
  check(forged.status === 403 && forged.body.error_code === 'QL-00026', 'viewer: a forged action gets 403', JSON.stringify(forged));
  check(await jobState(failing) === 'ERROR', 'viewer: the forged action changed nothing');

  check(errors.length === 0, 'no console errors on any page', errors.join('\n'));
  console.log(`figures ${JSON.stringify(figures)}`);
}

let code = 0;
try {
  await run();
} catch (e) {
  check(false, 'the run', e.stack);
  if (server) console.log(server.log().split('\n').slice(-30).join('\n'));
} finally {
  if (browser) await browser.close().catch(() => {});
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    await until('qilind stopped', () => server.exitCode !== null, 15000).catch(() => server.kill('SIGKILL'));
    check(server.exitCode === 0, 'qilind stopped cleanly', String(server.exitCode));
  }
  rmSync(tmp, { recursive: true, force: true });
  console.log(`${passed} passed, ${failed} failed`);
  code = failed ? 1 : 0;
}
process.exit(code);
