#!/usr/bin/env bash
# The viewer's browser tests: headless Chromium (Debian's /usr/bin/chromium, never a
# downloaded browser) plays every fault at every tier through the page, checks the baseline
# column against results/fault-table.json and the tamper flow, and saves
# results/viewer.png; on the inbox page (inbox.html) a person approves, settles an
# AMBIGUOUS refund and is refused when their lease is revoked, in the page and against
# `interlock serve` (INTERLOCK_CLI; skipped without it unless INTERLOCK_REQUIRE_CLI=1), and
# results/viewer-inbox.png is saved. Installs nothing beyond what hosts/node/test.sh installs: it reuses
# hosts/node's node_modules (playwright-core) and its build script (jco -> hosts/node/gen).
# Needs the components first: bash scripts/build-wasm.sh at the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/interlock-target}"
export npm_config_nodedir="${npm_config_nodedir:-/usr}"

for f in dist/interlock_gate.wasm dist/payments_sim.wasm; do
  [ -f "$f" ] || { echo "missing $f: run bash scripts/build-wasm.sh first" >&2; exit 2; }
done
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -qq && apt-get install -y -qq chromium >/dev/null
fi
(
  cd hosts/node
  # npm ci only when hosts/node's install is missing or older than its lockfile.
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error
  fi
  npm run --silent build
)
node --test viewer/test/
