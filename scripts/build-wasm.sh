#!/usr/bin/env bash
# Build the gate component (guest/component) for wasm32-wasip2 and copy it to dist/: the
# gate (its journal's backends inside it, over the host's primitive storage), the same gate
# as a wasi:http handler, the simulated payments service, the journal contract suite and the
# conformance runner.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/interlock-target}"
cargo build --release --target wasm32-wasip2 --manifest-path guest/component/Cargo.toml "$@"
mkdir -p dist
cp "$CARGO_TARGET_DIR/wasm32-wasip2/release/interlock_component.wasm" dist/interlock_gate.wasm
echo "dist/interlock_gate.wasm ($(wc -c < dist/interlock_gate.wasm) bytes)"
# The gate as a wasi:http handler of the HTTP API (world http-gate; `interlock serve`), in its
# own target folder: the same crate with --features http builds a file of the same name.
CARGO_TARGET_DIR="$CARGO_TARGET_DIR/http-gate" cargo build --release --target wasm32-wasip2 --manifest-path guest/component/Cargo.toml --features http "$@"
cp "$CARGO_TARGET_DIR/http-gate/wasm32-wasip2/release/interlock_component.wasm" dist/interlock_http.wasm
echo "dist/interlock_http.wasm ($(wc -c < dist/interlock_http.wasm) bytes)"
# The simulated payments service, loaded by hosts beside the gate (imports nothing).
cargo build --release --target wasm32-wasip2 --manifest-path adapters/payments-sim/component/Cargo.toml "$@"
cp "$CARGO_TARGET_DIR/wasm32-wasip2/release/interlock_payments_sim_component.wasm" dist/payments_sim.wasm
echo "dist/payments_sim.wasm ($(wc -c < dist/payments_sim.wasm) bytes)"
# The journal contract suite (adapters/journal) as a component: each host runs it over its
# own storage (imports only the storage the gate imports).
cargo build --release --target wasm32-wasip2 --manifest-path adapters/journal/contract/Cargo.toml "$@"
cp "$CARGO_TARGET_DIR/wasm32-wasip2/release/interlock_journal_contract.wasm" dist/journal_contract.wasm
echo "dist/journal_contract.wasm ($(wc -c < dist/journal_contract.wasm) bytes)"
# The conformance runner, which every host runs over its own gate and journal (imports the
# gate and its driver: tests/conformance/runner/wit).
cargo build --release --target wasm32-wasip2 --manifest-path tests/conformance/runner/Cargo.toml "$@"
cp "$CARGO_TARGET_DIR/wasm32-wasip2/release/interlock_conformance_runner.wasm" dist/conformance_runner.wasm
echo "dist/conformance_runner.wasm ($(wc -c < dist/conformance_runner.wasm) bytes)"
