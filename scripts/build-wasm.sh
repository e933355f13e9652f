#!/usr/bin/env bash
# Build the components for wasm32-wasip2 and copy them to dist/ (committed: a user of the
# Python or npm package needs no Rust), bit for bit the same on any machine with the
# toolchain of rust-toolchain.toml:
#   dist/interlock_gate.wasm      the gate (world gate-component): its journal's backends
#                                 inside it, over the host's primitive storage; the CLI,
#                                 Node, the browser, Python and Deno run it
#   dist/interlock_gate_api.wasm  the same gate with its HTTP API (world gate-api): the Worker
#   dist/interlock_http.wasm      the same, also a wasi:http handler (world http-gate):
#                                 `interlock serve`
#   dist/payments_sim.wasm, dist/journal_contract.wasm, dist/conformance_runner.wasm
# `--check` builds them without touching dist/ and fails, naming each, if a committed
# component differs from what its source builds (CI runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/interlock-target}"
case "$CARGO_TARGET_DIR" in /*) ;; *) CARGO_TARGET_DIR=$ROOT/$CARGO_TARGET_DIR ;; esac
out=dist
check=
if [ "${1:-}" = --check ]; then
  check=1
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
  shift
fi
mkdir -p "$out"

# Reproducible: cargo hashes a path dependency that lies outside its workspace's root (the
# core and adapters, for each component crate's own workspace) by its absolute path into
# -C metadata, so into every symbol name and the order of the functions. Every machine
# builds the components from this one path, a link to the checkout (one build at a time per
# machine). No other path of the machine reaches a component: the panic handler drops
# every location (the check below looks for the checkout, the cargo home and the target).
SRC=/tmp/interlock-wasm-src
exec 9>"$SRC.lock"
flock 9
rm -f "$SRC"
ln -s "$ROOT" "$SRC"
case "$out" in /*) ;; *) out=$ROOT/$out ;; esac
cargo_home=${CARGO_HOME:-$HOME/.cargo}

# build MANIFEST ARTIFACT DEST [cargo args]: one component, copied to $out/DEST.
build() {
  local manifest=$1 artifact=$2 dest=$3 target=$CARGO_TARGET_DIR
  shift 3
  # Each build of the gate crate with other features has its own target folder (the same
  # crate builds a file of the same name).
  case "$dest" in
    interlock_gate_api.wasm) target=$CARGO_TARGET_DIR/gate-api ;;
    interlock_http.wasm) target=$CARGO_TARGET_DIR/http-gate ;;
  esac
  CARGO_TARGET_DIR=$target cargo build --release --target wasm32-wasip2 --manifest-path "$SRC/$manifest" "$@"
  cp "$target/wasm32-wasip2/release/$artifact" "$out/$dest"
  for leak in "$ROOT" "$cargo_home" "$CARGO_TARGET_DIR"; do
    if grep -qaF "$leak" "$out/$dest"; then
      echo "$dest holds the path $leak of this machine: it would not build the same elsewhere" >&2
      exit 1
    fi
  done
  echo "dist/$dest ($(wc -c < "$out/$dest") bytes, $(gzip -9c "$out/$dest" | wc -c) gzipped)"
}
build guest/component/Cargo.toml interlock_component.wasm interlock_gate.wasm "$@"
build guest/component/Cargo.toml interlock_component.wasm interlock_gate_api.wasm --features api "$@"
build guest/component/Cargo.toml interlock_component.wasm interlock_http.wasm --features http "$@"
# The simulated payments service, loaded by hosts beside the gate (imports nothing).
build adapters/payments-sim/component/Cargo.toml interlock_payments_sim_component.wasm payments_sim.wasm "$@"
# The journal contract suite (adapters/journal) as a component: each host runs it over its
# own storage (imports only the storage the gate imports).
build adapters/journal/contract/Cargo.toml interlock_journal_contract.wasm journal_contract.wasm "$@"
# The conformance runner, which every host runs over its own gate and journal (imports the
# gate and its driver: tests/conformance/runner/wit).
build tests/conformance/runner/Cargo.toml interlock_conformance_runner.wasm conformance_runner.wasm "$@"

if [ -n "$check" ]; then
  bad=0
  for f in "$out"/*.wasm; do
    name=$(basename "$f")
    built=$(sha256sum < "$f" | cut -c1-64)
    committed=$(sha256sum < "$ROOT/dist/$name" 2>/dev/null | cut -c1-64 || true)
    if [ "$built" != "$committed" ]; then
      echo "dist/$name differs from what its source builds (built $built, dist/ has ${committed:-nothing}): run bash scripts/build-wasm.sh and commit dist/" >&2
      bad=1
    fi
  done
  [ "$bad" = 0 ] || exit 1
  echo "dist/: every component is what its source builds"
fi
