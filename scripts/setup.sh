#!/usr/bin/env bash
# Install what a fresh machine lacks for building and testing Interlock. Idempotent.
set -euo pipefail
rustup target add wasm32-wasip2 >/dev/null
rustup component add rustfmt clippy >/dev/null 2>&1 || true
# PostgreSQL 15 for the shared-journal tests (each starts its own throwaway cluster with
# scripts/postgres.sh; nothing runs as a service).
if [ ! -x /usr/lib/postgresql/15/bin/initdb ] && [ -z "${PG_BIN:-}" ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
  else
    echo "setup.sh: PostgreSQL is missing; run: sudo apt-get install postgresql" >&2
  fi
fi
# git for the git target's tests (tests run the git binary on throwaway repositories; 2.38+
# for merge-tree --write-tree).
if ! command -v git >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq git >/dev/null
  else
    echo "setup.sh: git is missing; run: sudo apt-get install git" >&2
  fi
fi
