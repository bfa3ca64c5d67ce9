// The gil study's CPU body in Node.js: K tasks each running the multiply loop
// (a, b = b, a*b, in 32-bit integers) N times, in K worker_threads (on every core: no lock
// between workers), or one after another on the main thread with --mode plain. With
// --calibrate N it times N iterations instead. Prints one CONCUR line: the work's wall, the
// calls that returned (each worker's message, or each plain call's result) and the bytes
// they produced, summed: each result's size, 8 bytes (a Float64Array element: a JavaScript
// number), as concur's spin.
//
//   node gil.js --mode workers --tasks 6 --iterations 60000000
'use strict';
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads');
const { performance } = require('node:perf_hooks');

// One call: its result and the result's bytes.
function work(n) {
  const result = spin(n);
  return { result, bytes: Float64Array.of(result).byteLength };
}

function spin(n) {
  let a = 3;
  let b = 5;
  for (let i = 0; i < n; i++) {
    const next = Math.imul(a, b) | 1;
    a = b;
    b = next;
  }
  return b;
}

if (!isMainThread) {
  parentPort.postMessage(work(workerData));
} else {
  const arg = (name, fallback) => {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : fallback;
  };
  const calibrate = arg('--calibrate', null);
  if (calibrate !== null) {
    spin(Number(calibrate));
    const t = performance.now();
    spin(Number(calibrate));
    console.log(JSON.stringify({ seconds: (performance.now() - t) / 1000, version: process.version }));
    process.exit(0);
  }
  const mode = arg('--mode', 'workers');
  const tasks = Number(arg('--tasks', 1));
  const n = Number(arg('--iterations', 1e6));
  const t0 = performance.now();
  const done = (results) => {
    const wall = (performance.now() - t0) / 1000;
    const line = {
      wall_s: wall,
      bytes: results.reduce((sum, r) => sum + r.bytes, 0),
      tasks_ok: results.length,
      runtime: `node ${process.version}`,
    };
    console.log(`CONCUR ${JSON.stringify(line)}`);
  };
  if (mode === 'plain') {
    done(Array.from({ length: tasks }, () => work(n)));
  } else {
    const runs = Array.from(
      { length: tasks },
      () =>
        new Promise((resolve, reject) => {
          const w = new Worker(__filename, { workerData: n });
          w.once('message', resolve);
          w.once('error', reject);
        }),
    );
    Promise.all(runs).then(done);
  }
}
