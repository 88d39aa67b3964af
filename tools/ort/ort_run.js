// ort_run.js: runs an ONNX model with ONNX Runtime (npm onnxruntime-node, CPU), the independent
// output oracle and speed peer of gopt's executor. Installed by `tools/install-deps.sh test`
// into .deps/node (or found through NODE_PATH).
//
//   node tools/ort/ort_run.js MODEL.onnx IN.json OUT_DIR [--threads N] [--time REPS]
//   node tools/ort/ort_run.js MODEL.onnx IN.json OUT_DIR [--threads N] --paced WARMUP
//
// IN.json: {"inputs": {"<name>": {"type": "float32", "dims": [1, 3], "file": "x.bin"}, ...}}
// (raw little-endian data; relative files are relative to IN.json; types: float32, float64,
// int8, uint8, int16, uint16, int32, int64, bool). Writes OUT_DIR/outputs.json in the same form
// with one .bin per output, plus "seconds" (median of REPS timed runs after one warm-up) when
// --time is given. --paced: no outputs; WARMUP runs, then "ready" on stdout, then for every line
// read on stdin one run and its wall and CPU seconds (process.cpuUsage: every thread) printed (bench/exec/pair_time.py alternates these
// runs with gopt's `run --time --paced`); ends at EOF. Any error: one line on stderr and exit 1.
'use strict';
const fs = require('fs');
const path = require('path');

function fail(msg) {
  process.stderr.write(`ort_run: ${msg}\n`);
  process.exit(1);
}

function loadOrt() {
  const here = path.resolve(__dirname, '..', '..', '.deps', 'node', 'node_modules');
  try {
    return require(path.join(here, 'onnxruntime-node'));
  } catch (e) {
    try {
      return require('onnxruntime-node');
    } catch (e2) {
      fail(`onnxruntime-node not found in ${here} (run tools/install-deps.sh test): ${e.message}`);
    }
  }
}

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array,
  int16: Int16Array, uint16: Uint16Array, int32: Int32Array, int64: BigInt64Array, bool: Uint8Array,
};

function readInputs(ort, inPath) {
  let spec;
  try {
    spec = JSON.parse(fs.readFileSync(inPath, 'utf8'));
  } catch (e) {
    fail(`${inPath}: ${e.message}`);
  }
  const feeds = {};
  for (const [name, t] of Object.entries(spec.inputs || {})) {
    const A = ARRAYS[t.type];
    if (!A) fail(`${inPath}: input '${name}': unknown type '${t.type}'`);
    const file = path.resolve(path.dirname(inPath), t.file);
    const buf = fs.readFileSync(file);
    const n = (t.dims || []).reduce((a, b) => a * b, 1);
    if (buf.length !== n * A.BYTES_PER_ELEMENT)
      fail(`${file}: ${buf.length} bytes, expected ${n * A.BYTES_PER_ELEMENT} for ${t.type}[${t.dims}]`);
    const data = new A(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
    feeds[name] = new ort.Tensor(t.type, t.type === 'bool' ? Uint8Array.from(data) : data, t.dims || []);
  }
  return feeds;
}

// --paced: WARMUP runs, "ready", then one timed run per stdin line (its wall and CPU seconds printed).
async function runPaced(session, feeds, warmup, model) {
  try {
    for (let r = 0; r < warmup; r++) await session.run(feeds);
    process.stdout.write('ready\n');
    const rl = require('readline').createInterface({ input: process.stdin });
    for await (const _ of rl) { // eslint-disable-line no-unused-vars
      const c0 = process.cpuUsage(), t0 = process.hrtime.bigint();
      await session.run(feeds);
      const wall = Number(process.hrtime.bigint() - t0) / 1e9, c = process.cpuUsage(c0);
      process.stdout.write(`${wall.toFixed(9)} ${((c.user + c.system) / 1e6).toFixed(9)}\n`);
    }
  } catch (e) {
    fail(`${model}: run: ${String(e.message).split('\n')[0]}`);
  }
}

async function main() {
  const args = process.argv.slice(2);
  let threads = 1, reps = 0, paced = -1;
  const pos = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--threads') threads = parseInt(args[++i], 10);
    else if (args[i] === '--time') reps = parseInt(args[++i], 10);
    else if (args[i] === '--paced') paced = parseInt(args[++i], 10);
    else pos.push(args[i]);
  }
  if (pos.length !== 3 || !(threads >= 1) || !(reps >= 0) || (paced !== -1 && !(paced >= 0)))
    fail('usage: ort_run.js MODEL.onnx IN.json OUT_DIR [--threads N] [--time REPS | --paced WARMUP]');
  const [model, inPath, outDir] = pos;
  const ort = loadOrt();
  let session;
  try {
    session = await ort.InferenceSession.create(model, {
      executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1,
      graphOptimizationLevel: 'all',
    });
  } catch (e) {
    fail(`${model}: ${String(e.message).split('\n')[0]}`);
  }
  const feeds = readInputs(ort, inPath);
  if (paced >= 0) return runPaced(session, feeds, paced, model);
  let results;
  try {
    results = await session.run(feeds);
  } catch (e) {
    fail(`${model}: run: ${String(e.message).split('\n')[0]}`);
  }
  const out = { outputs: {} };
  if (reps > 0) {
    const times = [];
    for (let r = 0; r < reps; r++) {
      const t0 = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e9);
    }
    times.sort((a, b) => a - b);
    out.seconds = times[Math.floor(times.length / 2)];
  }
  fs.mkdirSync(outDir, { recursive: true });
  let k = 0;
  for (const [name, t] of Object.entries(results)) {
    const file = `output_${k++}.bin`;
    const d = t.data;
    fs.writeFileSync(path.join(outDir, file), Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    out.outputs[name] = { type: t.type, dims: t.dims, file };
  }
  fs.writeFileSync(path.join(outDir, 'outputs.json'), JSON.stringify(out, null, 1));
}

main().catch((e) => fail(String(e && e.message ? e.message : e).split('\n')[0]));
