#!/usr/bin/env bash
# Every check CI runs: format, lints, native tests of the core and adapters, the component
# build, its import list, and the CLI host's tests (conformance of the real .wasm).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/interlock-target}"
bash scripts/setup.sh
# Each step says how long the one before it took (CI must stay well under 30 minutes).
step() {
  [ -n "${step_at:-}" ] && printf '   (%d s; %d s in all)\n' $((SECONDS - step_at)) "$SECONDS"
  step_at=$SECONDS
  printf '\n== %s\n' "$*"
}
step "format";  cargo fmt --all -- --check
                cargo fmt --manifest-path guest/component/Cargo.toml -- --check
                cargo fmt --manifest-path guest/component-rt/Cargo.toml -- --check
                cargo fmt --manifest-path adapters/payments-sim/component/Cargo.toml -- --check
                cargo fmt --manifest-path adapters/journal/contract/Cargo.toml -- --check
                cargo fmt --manifest-path tests/conformance/runner/Cargo.toml -- --check
                cargo fmt --manifest-path fuzz/Cargo.toml -- --check
# The workspace's own crates are linted while `cargo test` builds them (step "clippy on the
# workspace, building its tests"):
# clippy-driver, rustc with clippy's lints, compiles the workspace members only
# (RUSTC_WORKSPACE_WRAPPER), so the dependencies are built once, for the tests, instead of a
# second time in check mode for clippy. The wrapper is part of each member's fingerprint:
# every cargo command on this workspace below goes through it, or it would build them again.
# No clippy-driver would leave the wrapper empty and the workspace unlinted: stop instead.
clippy_driver=$(command -v clippy-driver) || { echo "test.sh: clippy-driver is missing (rustup component add clippy)" >&2; exit 1; }
lint=(env RUSTC_WORKSPACE_WRAPPER="$clippy_driver" CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__)
step "clippy: the components and the demo's CLI (the workspace: with the tests' build)"
                # One target folder for the three gates' checks: what their features share is
                # checked once (a check uplifts no file, so the three cannot overwrite each other's).
                cargo clippy --manifest-path guest/component/Cargo.toml --target wasm32-wasip2 -- -D warnings
                cargo clippy --manifest-path guest/component/Cargo.toml --target wasm32-wasip2 --features api -- -D warnings
                cargo clippy --manifest-path guest/component/Cargo.toml --target wasm32-wasip2 --features http -- -D warnings
                cargo clippy --manifest-path guest/component-rt/Cargo.toml --target wasm32-wasip2 -- -D warnings
                cargo clippy --manifest-path adapters/payments-sim/component/Cargo.toml --target wasm32-wasip2 -- -D warnings
                cargo clippy --manifest-path adapters/journal/contract/Cargo.toml --target wasm32-wasip2 -- -D warnings
                cargo clippy --manifest-path tests/conformance/runner/Cargo.toml --target wasm32-wasip2 -- -D warnings
                # The CLI the demo builds (scripts/demo.sh: no serve, mcp-proxy or SQL journals).
                cargo clippy -p interlock-cli --no-default-features -- -D warnings
# The committed components (dist/, what every host and test below loads, and what the Python
# and npm packages carry) must be bit for bit what their source builds with the pinned
# toolchain: a component that differs fails here, named.
step "components: dist/ is what its source builds"; bash scripts/build-wasm.sh --check
step "clippy on the workspace, building its tests"
"${lint[@]}" cargo test --workspace --all-targets --no-run
step "tests";   "${lint[@]}" cargo test --workspace   # core, adapters, CLI (conformance, crashes, kills), simulation, tamper, model check, fault table, bench --quick
step "conformance vectors on the wasi:http component (interlock serve's: it exports the same gate)"
INTERLOCK_WASM="$PWD/dist/interlock_http.wasm" "${lint[@]}" cargo test -q --workspace --test conformance
step "fuzz regressions"; cargo test --manifest-path fuzz/Cargo.toml
step "python host"
# The CLI binary `cargo test --workspace` built above (a separate `cargo build -p` would
# resolve features differently and build wasmtime a second time).
INTERLOCK_REQUIRE_CLI=1 INTERLOCK_CLI="$CARGO_TARGET_DIR/debug/interlock" bash hosts/python/test.sh
step "the Stripe demo: localstripe through the official SDK, the sender killed mid-send, one refund"
INTERLOCK_PY_VENV="${INTERLOCK_PY_VENV:-$PWD/hosts/python/.venv}" bash scripts/demo-stripe.sh >/dev/null
step "MCP proxies: the latency bench, quick (results/mcp.md comes from its full run)"
"${INTERLOCK_PY_VENV:-$PWD/hosts/python/.venv}/bin/python" experiments/mcp-bench/bench.py \
  --cli "$CARGO_TARGET_DIR/debug/interlock" --quick
step "real targets: PostgreSQL, git and email beside a direct call, quick (results/targets.md comes from its full run)"
"${INTERLOCK_PY_VENV:-$PWD/hosts/python/.venv}/bin/python" experiments/targets/bench.py --quick
step "frameworks: every 'with Interlock' cell of results/frameworks/*.json holds"
python3 experiments/frameworks/render.py --check
step "node host"
# After the Python host: the TypeScript MCP SDK's client drives both proxies, the CLI's and
# Python's (its venv, set up above).
INTERLOCK_CLI="$CARGO_TARGET_DIR/debug/interlock" \
  INTERLOCK_PYTHON="${INTERLOCK_PY_VENV:-$PWD/hosts/python/.venv}/bin/python" bash hosts/node/test.sh
step "export: the CLI, Python and Node send the same records (after the Node host is set up)"
# The Python host's run above skips this test when hosts/node is not installed yet.
(cd hosts/python && INTERLOCK_REQUIRE_NODE=1 INTERLOCK_REQUIRE_CLI=1 INTERLOCK_CLI="$CARGO_TARGET_DIR/debug/interlock" \
  INTERLOCK_WASM="$PWD/../../dist/interlock_gate.wasm" "${INTERLOCK_PY_VENV:-$PWD/.venv}/bin/python" -m pytest -q \
  -p no:cacheprovider tests/test_export.py -k test_every_host_sends_the_same_records)
step "edge: the gate as a Worker in workerd (Durable Object journal), the Agents SDK, Deno"
# After the Node host: the Worker bundles the package's transpiled component (hosts/node/gen).
# The HTTP API tests run against the Worker and against `interlock serve` (this CLI).
(cd hosts/edge && npm ci --no-audit --no-fund --loglevel=error && \
  INTERLOCK_REQUIRE_CLI=1 INTERLOCK_CLI="$CARGO_TARGET_DIR/debug/interlock" npm test)
step "edge: requests/s on one journal, both servers, quick (results/serve.md comes from its full run)"
(cd hosts/edge && node scripts/throughput.js --quick --cli "$CARGO_TARGET_DIR/debug/interlock")
step "viewer"
# The inbox page's serve mode runs against `interlock serve` (this CLI).
INTERLOCK_REQUIRE_CLI=1 INTERLOCK_CLI="$CARGO_TARGET_DIR/debug/interlock" bash viewer/test.sh
step "many workers of every host on one shared journal, killed at random"
# After the Node and Python hosts are set up: their workers join the CLI's (30 kills each on
# SQLite and PostgreSQL; INTERLOCK_SHARED_KILLS=500 for results/shared-journal.md).
INTERLOCK_PYTHON="${INTERLOCK_PY_VENV:-$PWD/hosts/python/.venv}/bin/python" INTERLOCK_NODE="$(command -v node)" \
  "${lint[@]}" cargo test -q -p interlock-cli --test shared_kill -- --ignored
step "done"
