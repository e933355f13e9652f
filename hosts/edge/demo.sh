#!/usr/bin/env bash
# One command: the gate as a Cloudflare Worker in workerd, and the crash demo against it.
# Needs hosts/node built (npm ci && npm run build there, after scripts/build-wasm.sh).
set -euo pipefail
cd "$(dirname "$0")"
export npm_config_nodedir=${npm_config_nodedir:-/usr}
[ -x node_modules/.bin/workerd ] || npm ci --no-audit --no-fund
node scripts/demo.js "$@"
