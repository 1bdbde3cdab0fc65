// A hot JavaScript function, `crunchNumbers`, for the given seconds. Run with
// `node --perf-basic-prof` so that V8 writes /tmp/perf-PID.map.
'use strict';

function crunchNumbers(n) {
  let total = 0;
  for (let i = 0; i < n; i++) {
    total = (total + i * i) % 1000003;
  }
  return total;
}

const seconds = Number(process.argv[2] || '1');
const end = Date.now() + seconds * 1000;
let sink = 0;
while (Date.now() < end) {
  sink += crunchNumbers(200000);
}
console.log(`sink=${sink}`);
