#!/usr/bin/env bash
# Set up a fresh machine, build the CLI host, and run the demo: one $20 refund, one real
# crash mid-send, recovery from the journal, one receipt. The gate component is dist/'s,
# committed and checked against its source by CI (scripts/build-wasm.sh --check); the CLI is
# built without serve, mcp-proxy and the SQL journals (none of which the demo runs), in the
# `demo` profile (Cargo.toml: dependencies unoptimized but cranelift's), so a fresh machine
# compiles wasmtime and the gate's host only, and quickly.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/interlock-target}"
bash scripts/setup.sh rust
[ -f dist/interlock_gate.wasm ] || bash scripts/build-wasm.sh >/dev/null
cargo build -q -p interlock-cli --no-default-features --profile demo
export INTERLOCK_WASM="$PWD/dist/interlock_gate.wasm"
for mode in "${@:-naive 2 3}"; do
  for m in $mode; do
    echo; echo "################ interlock demo $m"
    "$CARGO_TARGET_DIR/demo/interlock" demo "$m"
  done
done
