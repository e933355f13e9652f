#!/usr/bin/env bash
# The Node and browser host's checks: install (npm ci, Chromium from Debian if missing),
# transpile ../../dist/*.wasm with jco, type-check (tsc), then every Node and Chromium test.
# Needs the components built first (bash scripts/build-wasm.sh at the repository root).
set -euo pipefail
cd "$(dirname "$0")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/interlock-target}"
# fs-ext (flock) and better-sqlite3 (the SQLite journal) build against the system's Node
# headers; no header download. better-sqlite3 is built from source: its prebuilt binaries
# are downloaded from a host this machine does not reach.
export npm_config_nodedir="${npm_config_nodedir:-/usr}"
export npm_config_build_from_source="${npm_config_build_from_source:-true}"

for f in ../../dist/interlock_gate.wasm ../../dist/payments_sim.wasm ../../dist/conformance_runner.wasm ../../dist/journal_contract.wasm; do
  [ -f "$f" ] || { echo "missing $f: run bash scripts/build-wasm.sh first" >&2; exit 2; }
done
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -qq && apt-get install -y -qq chromium >/dev/null
fi
npm ci --no-audit --no-fund --loglevel=error
npm run --silent build
# The JS against its JSDoc types, then the generated declarations (types/) as users meet them.
npm run --silent typecheck
# The cross-host tests drive the CLI binary. The PostgreSQL tests start their own clusters
# with ../../scripts/postgres.sh (scripts/setup.sh installs PostgreSQL; without it they are
# skipped, saying why).
if [ -z "${INTERLOCK_BIN:-}" ] && [ ! -x "$CARGO_TARGET_DIR/debug/interlock" ]; then
  (cd ../.. && cargo build -q -p interlock-cli)
fi
# localstripe (PyPI; a fake Stripe server written by others) for test/stripe.test.js: the
# Python host's venv when it has it (scripts/test.sh passes INTERLOCK_PYTHON), else a venv here.
if [ -z "${INTERLOCK_LOCALSTRIPE_PYTHON:-}" ]; then
  if [ -n "${INTERLOCK_PYTHON:-}" ] && "$INTERLOCK_PYTHON" -c 'import localstripe' 2>/dev/null; then
    export INTERLOCK_LOCALSTRIPE_PYTHON="$INTERLOCK_PYTHON"
  else
    [ -x .venv-localstripe/bin/python ] || python3 -m venv .venv-localstripe
    .venv-localstripe/bin/python -m pip --disable-pip-version-check -q install 'localstripe==1.15.10'
    export INTERLOCK_LOCALSTRIPE_PYTHON="$PWD/.venv-localstripe/bin/python"
  fi
fi
# INTERLOCK_TEST_WORKERS test files at a time (default 4; Node's own default is one fewer
# than the cores: one here). Most of a file's time is spent waiting on child processes.
node --test --test-concurrency="${INTERLOCK_TEST_WORKERS:-4}" test/*.test.js test/frameworks/*.test.js test/browser/*.test.js
