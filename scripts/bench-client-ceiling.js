#!/usr/bin/env node
// The most builds a second the peers' REST client can send on this machine, whatever the server:
// the same submit loop as the side-by-side benchmark's Qilin client (POST
// /kylin/api/models/{model}/segments over HTTP keep-alive, `conc` in flight, a JSON body each way),
// against a stub server that answers every build at once with the body Qilin sends, in a process
// of its own (the other core). Prints one JSON line per round: acknowledgements a second and the
// client's CPU per request. docs/performance.md (The client's ceiling) has the run.
// Usage: node scripts/bench-client-ceiling.js [n=20000 conc=16 rounds=3 port=57180]
'use strict';
const http = require('http');
const { fork } = require('child_process');
const args = Object.fromEntries(process.argv.slice(2).map((a) => a.split('=')).map(([k, ...v]) => [k, v.join('=')]));
const N = +(args.n || 20000), CONC = +(args.conc || 16), ROUNDS = +(args.rounds || 3), PORT = +(args.port || 57180);

function serve() {
  let n = 0;
  const server = http.createServer((q, r) => {
    const chunks = [];
    q.on('data', (c) => chunks.push(c));
    q.on('end', () => {
      JSON.parse(Buffer.concat(chunks).toString()); // what Qilin does with the body, at least
      const id = '01a24976-d4d7-7001-817e-' + String(n++).padStart(12, '0');
      const body = JSON.stringify({ code: '000', data: { jobs: [{ job_name: 'INC_BUILD', job_id: id }] }, msg: '' });
      r.writeHead(200, { 'Content-Type': 'application/json;charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
      r.end(body);
    });
  });
  server.listen(PORT, '127.0.0.1', () => process.send('ready'));
}

async function round() {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONC + 4 });
  const AUTH = 'Basic ' + Buffer.from('ADMIN:KYLIN').toString('base64');
  const DAY = 86400000, BASE = Date.UTC(2000, 0, 1);
  const call = (path, body) => new Promise((res, rej) => {
    const data = JSON.stringify(body);
    const rq = http.request({ host: '127.0.0.1', port: PORT, method: 'POST', path, agent,
      headers: { Authorization: AUTH, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } }, (r) => {
      const chunks = []; r.on('data', (c) => chunks.push(c));
      r.on('end', () => res(JSON.parse(Buffer.concat(chunks).toString())));
    });
    rq.on('error', rej); rq.write(data); rq.end();
  });
  let next = 0, sent = 0;
  const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
  await Promise.all(Array.from({ length: CONC }, async () => {
    while (sent < N) {
      sent++;
      const i = next++, day = Math.floor(i / 100);
      const b = await call(`/kylin/api/models/m${i % 100}/segments`,
        { project: 'bench', start: String(BASE + day * DAY), end: String(BASE + (day + 1) * DAY) });
      if (!b.data.jobs[0].job_id) throw new Error('no job id');
    }
  }));
  const secs = Number(process.hrtime.bigint() - t0) / 1e9, cpu = process.cpuUsage(c0);
  agent.destroy();
  return { n: N, conc: CONC, acks_per_s: Math.round(N / secs), client_cpu_us_per_request: +((cpu.user + cpu.system) / N).toFixed(1) };
}

async function main() {
  const stub = fork(__filename, ['serve', `port=${PORT}`]);
  await new Promise((res) => stub.once('message', res));
  try {
    for (let r = 1; r <= ROUNDS; r++) console.log(JSON.stringify({ round: r, ...(await round()) }));
  } finally {
    stub.kill();
  }
}

if (process.argv[2] === 'serve') serve();
else main().catch((e) => { console.error(e); process.exit(1); });
