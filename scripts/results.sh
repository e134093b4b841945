#!/usr/bin/env bash
# Regenerates docs/results.md, its tables (docs/results/) and plots (docs/plots/) in the
# simulator: `cocktail results --out docs` on a release build.
source "$(dirname "$0")/lib.sh"
"$ROOT/scripts/setup.sh"
# The plots' font.
apt_install fonts-dejavu-core
cd "$ROOT"
log "cargo build --release -p cocktail"
cargo build --release -p cocktail --locked
log "cocktail results --out docs"
exec target/release/cocktail results --out docs "$@"
