// The tasks study in Node.js: N promises that each wait on a timer, awaited together, as
// Node's users write it (setTimeout in a Promise, Promise.all). Prints one CONCUR line: the
// tasks that finished (each promise resolves to 1 when its wait is over, summed), the work's
// wall, the time to start every task, and how late each woke.
//
//   node tasks.js --tasks 1000000 --wait-ms 10000
'use strict';
const { performance } = require('node:perf_hooks');

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

const n = arg('--tasks', 1);
const waitMs = arg('--wait-ms', 10000);
const late = new Float64Array(n);
let lastStart = 0;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function task(i, t0) {
  const start = performance.now();
  lastStart = start - t0;
  await sleep(waitMs);
  late[i] = performance.now() - start - waitMs;
  return 1;
}

async function main() {
  const t0 = performance.now();
  const tasks = [];
  for (let i = 0; i < n; i++) tasks.push(task(i, t0));
  const done = await Promise.all(tasks);
  const finished = done.reduce((sum, one) => sum + one, 0);
  const wall = (performance.now() - t0) / 1000;
  late.sort();
  const q = (p) => Math.max(0, Math.round(1000 * late[Math.round(p * (n - 1))]));
  const line = {
    wall_s: wall,
    tasks_ok: finished,
    // A waiting task produces no bytes (concur's sleep task neither).
    bytes: 0,
    runtime: `node ${process.version}`,
    wakeups: {
      start_all_s: lastStart / 1000,
      late_us: { p50: q(0.5), p90: q(0.9), p99: q(0.99), p999: q(0.999), max: q(1) },
    },
  };
  console.log(`CONCUR ${JSON.stringify(line)}`);
}

main();
