// ONNX Runtime's own per-node profile of one model, for bench/op_profile.py: the same session
// options as serve.js (CPU provider, all graph optimizations, one intra-op thread), `runs` calls
// on a random input; ONNX Runtime writes the profile to out_prefix_<date>.json. The intra-op
// thread count is the optional last argument (default 1).
//
//   node profile.js model.onnx runs 1x3x224x224 out_prefix [threads]
'use strict';
const ort = require('onnxruntime-node');

(async () => {
  const [file, runsArg, shapeArg, prefix, threadsArg] = process.argv.slice(2);
  if (!file || !prefix) {
    console.error('usage: node profile.js model.onnx runs NxCxHxW out_prefix [threads]');
    process.exit(2);
  }
  const session = await ort.InferenceSession.create(file, {
    intraOpNumThreads: Number(threadsArg) || 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    enableProfiling: true,
    profileFilePrefix: prefix,
  });
  const shape = shapeArg.split('x').map(Number);
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  for (let i = 0; i < data.length; ++i)
    data[i] = Math.random();
  const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', data, shape)};
  const runs = Number(runsArg) || 100;
  for (let i = 0; i < runs; ++i)
    await session.run(feeds);
  session.endProfiling();
})().catch((e) => {
  console.error('profile.js: error: ' + String(e && e.message ? e.message : e).split('\n')[0]);
  process.exit(2);
});
