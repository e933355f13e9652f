#!/usr/bin/env bash
# Set up a fresh machine, build the gate component and the CLI host, and run the
# demo: one $20 refund, one real crash mid-send, recovery from the journal, one receipt.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/interlock-target}"
bash scripts/setup.sh
bash scripts/build-wasm.sh >/dev/null
cargo build -q -p interlock-cli
export INTERLOCK_WASM="$PWD/dist/interlock_gate.wasm"
for mode in "${@:-naive 2 3}"; do
  for m in $mode; do
    echo; echo "################ interlock demo $m"
    "$CARGO_TARGET_DIR/debug/interlock" demo "$m"
  done
done
