#!/usr/bin/env bash
# Sets up and runs Cocktail-rs on embedded defaults (no Redis, no MongoDB needed): the
# master plus one worker per zoo model, via `cocktail up`. PORT picks the master's port.
source "$(dirname "$0")/lib.sh"
"$ROOT/scripts/setup.sh"
setup_ort
cd "$ROOT"
log "cargo build --workspace --bins"
cargo build --workspace --bins --locked
exec target/debug/cocktail up --port "${PORT:-8080}" "$@"
