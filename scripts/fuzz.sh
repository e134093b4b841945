#!/usr/bin/env bash
# Fuzzes every parser of untrusted bytes (the cargo-fuzz targets in fuzz/) for SECONDS
# each, from a copy of the committed corpus, and fails on any crash, panic, broken
# invariant, timeout or out-of-memory. `scripts/test.sh` runs it with 20 s.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     # default: 30 s, every target
#
# FUZZ_RUNS=N stops each target after N executions (SECONDS still bounds it); FUZZ_WORK=DIR
# keeps the grown corpora and logs in DIR instead of a temporary directory; FUZZ_OUT=DIR
# also writes the run's table to DIR/measured/fuzzing.md, which docs/results.md includes
# (`cocktail results --only measured` puts it on the page); FUZZ_DEV=1
# builds without optimisation (CI's short runs: a cold build of half the time, fewer
# executions per second).
#
# cargo-fuzz needs nightly flags: the pinned stable toolchain gives them with
# RUSTC_BOOTSTRAP=1. Targets build without a sanitizer (`-s none`): the workspace forbids
# unsafe code, and AddressSanitizer would double the build and halve the executions.
# Overflow checks and debug assertions stay on (`-a`). A crash leaves its input in
# fuzz/artifacts/TARGET/; the command to replay it is printed.
source "$(dirname "$0")/lib.sh"
FUZZ_ARGS="$*"
FUZZ_SECONDS="${1:-30}"
shift $(($# > 0 ? 1 : 0))
CARGO_FUZZ_VERSION="0.13.2"
FUZZ_FLAGS=(-s none -a)
[ -n "${FUZZ_DEV:-}" ] && FUZZ_FLAGS+=(--dev)

if ! "$DEPS/cargo-fuzz/bin/cargo-fuzz" --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  log "cargo install cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install --root "$DEPS/cargo-fuzz" --locked --version "$CARGO_FUZZ_VERSION" cargo-fuzz
fi
export PATH="$DEPS/cargo-fuzz/bin:$PATH"
export RUSTC_BOOTSTRAP=1
unset CARGO_TARGET_DIR # fuzz/target, git-ignored
# Fuzz builds are cold or nearly so; incremental state would only take disk.
export CARGO_INCREMENTAL=0
cd "$ROOT"

log "cargo fmt --check (fuzz/)"
cargo fmt --manifest-path fuzz/Cargo.toml --check

targets=("$@")
[ ${#targets[@]} -eq 0 ] && mapfile -t targets < <(cargo fuzz list)
log "cargo fuzz build (${targets[*]})"
cargo fuzz build "${FUZZ_FLAGS[@]}"
df -h "$ROOT" | tail -n 1 >&2

if [ -n "${FUZZ_WORK:-}" ]; then
  work="$FUZZ_WORK"
  mkdir -p "$work"
else
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi
summary=()
rows=()
failed=()
# What each target parses, for the table FUZZ_OUT writes.
declare -A PARSES=(
  [master_infer]="\`/v2/models/{task}/infer\` JSON for both tasks: inputs, shapes, texts, constraints, labels, scheme"
  [master_classify]="\`/v1/classify\` as JSON and as multipart, delivered in chunks of 1 to 64 bytes"
  [worker_request]="a worker's OIP JSON for an image model and a text model, then batching"
  [worker_image]="raw PNG/JPEG bodies: decoding, the 4096-pixel limit, grey, resizing, normalising"
  [worker_text]="the WordPiece tokenizer with the model's truncation"
  [control_plane]="registrations, heartbeats, notices, deregistrations, and the master's registration checks"
)
for target in "${targets[@]}"; do
  log "fuzzing $target for ${FUZZ_SECONDS}s"
  # A copy, so that what the run adds never touches the committed corpus.
  rm -rf "${work:?}/$target"
  cp -r "fuzz/corpus/$target" "$work/$target"
  args=(-max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
  [ -n "${FUZZ_RUNS:-}" ] && args+=(-runs="$FUZZ_RUNS")
  [ -f "fuzz/dict/$target.dict" ] && args+=(-dict="fuzz/dict/$target.dict")
  if cargo fuzz run "${FUZZ_FLAGS[@]}" "$target" "$work/$target" -- "${args[@]}" \
    >"$work/$target.log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$target")
    grep -E "panicked at|ERROR: libFuzzer|SUMMARY|Test unit written" "$work/$target.log" >&2 || true
    tail -n 40 "$work/$target.log" >&2
    log "replay: RUSTC_BOOTSTRAP=1 cargo fuzz run ${FUZZ_FLAGS[*]} $target fuzz/artifacts/$target/<file>"
  fi
  runs=$(grep -oP '^stat::number_of_executed_units:\s*\K\d+' "$work/$target.log" || echo "?")
  speed=$(grep -oP '^stat::average_exec_per_sec:\s*\K\d+' "$work/$target.log" || echo "?")
  cov=$(grep -oP '\bcov: \K\d+' "$work/$target.log" | tail -n 1 || echo "?")
  summary+=("$(printf '%-16s %-7s %10s runs %7s/s  cov %s' "$target" "$status" "$runs" "$speed" "$cov")")
  rows+=("| \`$target\` | ${PARSES[$target]:-} | $runs | $speed | $cov | $status |")
done
printf '%s\n' "${summary[@]}" >&2
if [ -n "${FUZZ_OUT:-}" ]; then
  mkdir -p "$FUZZ_OUT/measured"
  build="optimised"
  [ -n "${FUZZ_DEV:-}" ] && build="unoptimised"
  {
    echo "Measured on $(date -u +%F) by \`${FUZZ_DEV:+FUZZ_DEV=1 }${FUZZ_RUNS:+FUZZ_RUNS=$FUZZ_RUNS }FUZZ_OUT=$FUZZ_OUT scripts/fuzz.sh $FUZZ_ARGS\`"
    echo "($build build, $(nproc) cores, one target at a time)."
    echo
    echo "Each cargo-fuzz target (\`fuzz/\`) runs a real parser on arbitrary bytes from its"
    echo "committed corpus (\`fuzz/corpus/\`) and checks more than survival: what it accepts"
    echo "respects every limit, what it refuses is a 4xx naming the field. No sanitizer (the"
    echo "workspace forbids unsafe code); overflow checks and debug assertions on (\`-s none -a\`)."
    echo "What fuzzing found so far, and each fix's regression test: \`fuzz/README.md\`."
    echo
    echo "| target | parses | executions | exec/s | coverage (edges) | result |"
    echo "|---|---|---:|---:|---:|---|"
    printf '%s\n' "${rows[@]}"
  } >"$FUZZ_OUT/measured/fuzzing.md"
  log "wrote $FUZZ_OUT/measured/fuzzing.md"
fi
# The closing line CI reads: each target a test that passes when it found nothing.
closing() { printf 'fuzz: %d passed, %d failed\n' "$((${#targets[@]} - ${#failed[@]}))" "${#failed[@]}"; }
if [ ${#failed[@]} -gt 0 ]; then
  log "fuzzing failed: ${failed[*]}"
  closing
  exit 1
fi
log "fuzzing: ${#targets[@]} targets, no crash"
closing
