#!/usr/bin/env bash
# Sets up and runs Cocktail-rs on embedded defaults (no Redis, no MongoDB needed).
# Until the master lands (issue 4) this serves one zoo model with `cocktail-worker`;
# pick it with COCKTAIL_MODEL and the port with PORT.
source "$(dirname "$0")/lib.sh"
"$ROOT/scripts/setup.sh"
setup_ort
cd "$ROOT"
log "cargo build --workspace --bins"
cargo build --workspace --bins --locked
MODEL="${COCKTAIL_MODEL:-cnn_med}"
PORT="${PORT:-8080}"
SAMPLE=$(ls models/samples/fashion/*.png | head -n 1)
cat >&2 <<TXT

Serving \`$MODEL\` on http://127.0.0.1:$PORT (Ctrl-C stops it). Try:

  curl -s -H 'content-type: application/octet-stream' --data-binary @$SAMPLE \\
       http://127.0.0.1:$PORT/v2/models/$MODEL/infer

TXT
exec target/debug/cocktail-worker --model "$MODEL" --port "$PORT"
