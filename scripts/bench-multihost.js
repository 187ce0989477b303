#!/usr/bin/env node
// End-to-end builds through the REST API of several servers sharing one store: the peers'
// workload (durable INC_BUILDs of one noop step, `conc` requests in flight over `models`
// models), with the builds POSTed round-robin to the servers of `ports`. Prints one JSON line:
// acknowledged builds/s, e2e jobs/s (n / (last exec_start_time - first send)) and send->start
// p50/p99 (exec_start_time, epoch ms, against the time taken before the POST).
// Usage: node scripts/bench-multihost.js ports=P1[,P2,...] [n=3000 conc=16 models=100 user=ADMIN:KYLIN label=...]
// Every server must accept user; the project `bench` and its models are created through the
// first port. docs/performance.md (Several servers on PostgreSQL) has the run.
'use strict';
const http = require('http');
const args = Object.fromEntries(process.argv.slice(2).map((a) => a.split('=')).map(([k, ...v]) => [k, v.join('=')]));
const PORTS = (args.ports || '').split(',').filter(Boolean).map(Number);
const N = +(args.n || 3000), CONC = +(args.conc || 16), MODELS = +(args.models || 100);
const AUTH = 'Basic ' + Buffer.from(args.user || 'ADMIN:KYLIN').toString('base64');
const agent = new http.Agent({ keepAlive: true, maxSockets: CONC + 4 });
const DAY = 86400000, BASE = Date.UTC(2000, 0, 1);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
if (!PORTS.length) { console.error('usage: node bench-multihost.js ports=P1[,P2,...] [n=] [conc=] [models=]'); process.exit(2); }

function call(port, method, path, body) {
  return new Promise((res, rej) => {
    const data = body ? JSON.stringify(body) : null;
    const rq = http.request({ host: '127.0.0.1', port, method, path, agent,
      headers: { Authorization: AUTH, 'Content-Type': 'application/json', ...(data ? { 'Content-Length': Buffer.byteLength(data) } : {}) } }, (r) => {
      const chunks = []; r.on('data', (c) => chunks.push(c));
      r.on('end', () => { const t = Buffer.concat(chunks).toString(); try { res({ st: r.statusCode, b: JSON.parse(t) }); } catch (e) { res({ st: r.statusCode, b: t }); } });
    });
    rq.on('error', rej); if (data) rq.write(data); rq.end();
  });
}
const must = (r, what) => { if (r.st !== 200 || r.b.code !== '000') throw new Error(`${what}: ${r.st} ${JSON.stringify(r.b).slice(0, 300)}`); return r.b.data; };
const pct = (a, p) => { const s = Float64Array.from(a).sort(); return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : null; };

let next = 0; // job i builds day floor(i / MODELS) of model i % MODELS, through server i % servers
async function submit() {
  const i = next++, port = PORTS[i % PORTS.length], m = `m${i % MODELS}`, day = Math.floor(i / MODELS);
  const t = Date.now();
  const d = must(await call(port, 'POST', `/kylin/api/models/${m}/segments`, { project: 'bench', start: String(BASE + day * DAY), end: String(BASE + (day + 1) * DAY) }), 'build');
  return { id: d.jobs[0].job_id, t };
}
async function allJobs() {
  const out = new Map();
  for (let page = 0; ; page++) {
    const d = must(await call(PORTS[0], 'GET', `/kylin/api/jobs?project=bench&page_offset=${page}&page_size=1000&time_filter=4`), 'jobs');
    for (const j of d.value) out.set(j.id, j);
    if ((page + 1) * 1000 >= d.total_size) return out;
  }
}
async function main() {
  must(await call(PORTS[0], 'POST', '/kylin/api/projects', { name: 'bench' }), 'project');
  for (let k = 0; k < MODELS; k++)
    must(await call(PORTS[0], 'POST', '/kylin/api/models', { project: 'bench', name: `m${k}`, partition_desc: { partition_date_column: 'DT', partition_date_format: 'yyyy-MM-dd' } }), 'model');
  const sent = []; const t0 = Date.now();
  await Promise.all(Array.from({ length: CONC }, async () => { while (sent.length < N) { const slot = sent.length; sent.push(null); sent[slot] = await submit(); } }));
  const tAck = Date.now();
  let all, end = Date.now() + 900000;
  for (;;) {
    all = await allJobs();
    const done = sent.filter((s) => { const j = all.get(s.id); return j && j.job_status === 'FINISHED'; }).length;
    if (done === N) break;
    if (Date.now() > end) throw new Error(`only ${done}/${N} finished in time`);
    await sleep(500);
  }
  const lat = []; let lastStart = 0;
  for (const s of sent) { const j = all.get(s.id); lat.push(j.exec_start_time - s.t); lastStart = Math.max(lastStart, j.exec_start_time); }
  console.log(JSON.stringify({ label: args.label || `${PORTS.length} servers`, servers: PORTS.length, n: N, conc: CONC, models: MODELS,
    ack_per_s: Math.round(N / ((tAck - t0) / 1000)), e2e_jobs_per_s: Math.round(N / ((lastStart - t0) / 1000)),
    send_start_p50_ms: pct(lat, 0.5), send_start_p99_ms: pct(lat, 0.99) }));
  agent.destroy();
}
main().catch((e) => { console.error(e.message); process.exit(1); });
