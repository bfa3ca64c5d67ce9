// The crawl study in Node.js: N GETs of the delay server, C at a time, as Node's users write
// it (the built-in fetch, C async workers taking the next URL). Prints one CONCUR line: the
// work's wall, bytes, and requests ok and failed. Over https, trust a CA with
// NODE_EXTRA_CA_CERTS=PEM in the environment (Node reads it at start-up).
//
//   node crawl.js --url http://127.0.0.1:PORT -n 1000 -c 100
'use strict';
const { performance } = require('node:perf_hooks');

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
}

const base = arg('--url', '');
const n = Number(arg('-n', 1000));
const c = Number(arg('-c', 100));
const delay = Number(arg('--delay', 100));

// The same names every run (a seeded generator), as the other clients.
let seed = 42;
const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const urls = Array.from({ length: n }, () => {
  let name = '';
  for (let j = 0; j < 10; j++) name += String.fromCharCode(97 + Math.floor(random() * 26));
  return `${base}/add?name=crawl${name}&delay=${delay}`;
});

async function main() {
  let next = 0;
  let ok = 0;
  let failed = 0;
  let bytes = 0;
  async function worker() {
    for (let i = next++; i < n; i = next++) {
      try {
        const r = await fetch(urls[i]);
        const body = await r.arrayBuffer();
        if (r.status === 200) {
          ok++;
          bytes += body.byteLength;
        } else {
          failed++;
        }
      } catch {
        failed++;
      }
    }
  }
  const t0 = performance.now();
  await Promise.all(Array.from({ length: Math.min(c, n) }, worker));
  const wall = (performance.now() - t0) / 1000;
  const line = { wall_s: wall, bytes, tasks_ok: ok, tasks_failed: failed, runtime: `node ${process.version}` };
  console.log(`CONCUR ${JSON.stringify(line)}`);
}

main();
