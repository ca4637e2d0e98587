#!/usr/bin/env bash
# Installs ONNX Runtime for Node.js (npm's onnxruntime-node, CPU provider) into bench/ort, for
# `make bench-peer`'s second peer. Quiet when it is there. Its install script only fetches GPU
# binaries (from nuget.org): skipped, the CPU library ships in the package. Node.js and npm come
# from the machine, else from Debian (nodejs, npm).
set -euo pipefail
cd "$(dirname "$0")/../bench/ort"
[[ -f node_modules/onnxruntime-node/package.json ]] && exit 0
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
echo "install-ort: npm install onnxruntime-node (bench/ort)" >&2
npm install --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null
