#!/usr/bin/env bash
# Install what a fresh machine lacks for building and testing Interlock. Idempotent.
set -euo pipefail
rustup target add wasm32-wasip2 >/dev/null
rustup component add rustfmt clippy >/dev/null 2>&1 || true
