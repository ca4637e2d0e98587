// ONNX Runtime as a peer for bench/python_peers.py: one session, driven over stdin/stdout in JSON
// lines, so the Python driver can interleave its rounds with the other contenders'. Each timed
// run is measured here (process.hrtime), not across the pipe.
//
//   {"load": "m.onnx", "threads": 1}              -> {"ok": true, "inputs": [...], "outputs": [...]}
//   {"input": "x.bin", "shape": [1, 3, 224, 224]}  -> {"ok": true}   (raw float32, little-endian)
//   {"run": 1}                                     -> {"ok": true, "ms": [2.91]}
//   {"save": "y.bin"}                              -> {"ok": true, "shape": [1, 1000]} (first output)
// Errors: {"ok": false, "error": "..."}.
'use strict';
const fs = require('fs');
const readline = require('readline');
const ort = require('onnxruntime-node');

let session = null;
let feeds = null;
let last = null;

async function handle(cmd) {
  if (cmd.load) {
    const threads = cmd.threads || 1;
    session = await ort.InferenceSession.create(cmd.load, {
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
    });
    return {ok: true, inputs: session.inputNames, outputs: session.outputNames};
  }
  if (cmd.input) {
    const bytes = fs.readFileSync(cmd.input);
    const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
    feeds = {[session.inputNames[0]]: new ort.Tensor('float32', data, cmd.shape)};
    return {ok: true};
  }
  if (cmd.run) {
    const ms = [];
    for (let i = 0; i < cmd.run; ++i) {
      const t0 = process.hrtime.bigint();
      last = await session.run(feeds);
      ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    return {ok: true, ms};
  }
  if (cmd.save) {
    const y = last[session.outputNames[0]];
    fs.writeFileSync(cmd.save, Buffer.from(y.data.buffer, y.data.byteOffset, y.data.byteLength));
    return {ok: true, shape: y.dims};
  }
  return {ok: false, error: 'unknown command ' + JSON.stringify(cmd)};
}

const rl = readline.createInterface({input: process.stdin});
let chain = Promise.resolve();
rl.on('line', (line) => {
  chain = chain.then(async () => {
    let reply;
    try {
      reply = await handle(JSON.parse(line));
    } catch (e) {
      reply = {ok: false, error: String(e && e.message ? e.message : e).split('\n')[0]};
    }
    process.stdout.write(JSON.stringify(reply) + '\n');
  });
});
