#!/usr/bin/env bash
# Cocktail-rs side by side with Ray Serve (issue 19, point 5): the same three-model
# fashion ensemble (cnn_med, mlp_med, lenet; majority vote) through
#   (a) Cocktail: a master and one worker per model (peer-bench starts them),
#   (b) Ray Serve 2.60 with its default Python proxy (benches/peers/ray/app.py),
#   (c) Ray Serve with RAY_SERVE_THROUGHPUT_OPTIMIZED=1 RAY_SERVE_ENABLE_HA_PROXY=1
#       (HAProxy ingress, direct ingress and gRPC between replicas),
# driven by the same closed-loop client (target/release/peer-bench) at each concurrency,
# one system at a time, alternating a, b, c per concurrency. Each run starts its system
# from nothing and stops it after; Ray is stopped with `ray stop --force` and whatever
# was left of its Unix session is killed. Prints one markdown table and the ratios
# Cocktail / Ray. Sets everything up on a fresh machine: .deps/ray (a venv with PyPI
# ray[serve], onnxruntime, numpy, pillow), ONNX Runtime for the Rust binaries, and the
# release build.
#
#   scripts/peer-ray.sh [--requests N] [--warmup N] [--concurrency 1,8,32]
#                       [--systems cocktail,ray,ray-haproxy] [--port P] [--gcs-port P]
#                       [--runs N] [--out DIR]
#
# With --runs N the whole comparison runs N times and the report is the median run's
# (by Cocktail's throughput over Ray Serve's in HAProxy mode at 8 clients), its first
# line quoting every run's figures and each one's median against its goal. With --out
# DIR the report is also written to DIR/measured/ray-serve.md, which docs/results.md
# includes (`--runs 3 --out docs`).
#
# Defaults: 2,000 measured requests after 200 warm-up ones per row (about 7 minutes on
# a 2-core machine once built: half of it Ray starting and stopping six times, most of
# the rest Ray's default proxy at 50-70 requests per second).
source "$(dirname "$0")/lib.sh"

REQUESTS=2000
WARMUP=200
CONCURRENCY="1,8,32"
SYSTEMS="cocktail,ray,ray-haproxy"
PORT=28000      # Serve's HTTP port (outside Ray's worker port range, 10002-19999)
GCS_PORT=26379  # not Redis's 6379, which the tests use
RAY_VERSION="${RAY_VERSION:-2.60.0}"
RUNS=1
REPORT=/dev/null
ARGS="$*"
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) REQUESTS="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --concurrency) CONCURRENCY="$2"; shift 2 ;;
    --systems) SYSTEMS="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    --gcs-port) GCS_PORT="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --out) mkdir -p "$2/measured"; REPORT="$(cd "$2" && pwd)/measured/ray-serve.md"; shift 2 ;;
    -h|--help) sed -n '2,/^source/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

VENV="$DEPS/ray"
PY="$VENV/bin/python"
RAY="$VENV/bin/ray"
BENCH="$ROOT/target/release/peer-bench"
APP="$ROOT/benches/peers/ray/app.py"
URL="http://127.0.0.1:$PORT/v2/models/fashion/infer"
OUT="$(mktemp -d)"
RAY_SID=""
RAY_SESSION_DIR=""
RAY_NODE_ID=""

# --- Setup -------------------------------------------------------------------------
command -v cargo >/dev/null || { echo "cargo not found: install Rust with rustup" >&2; exit 1; }
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "python3 >= 3.11 is needed (the app reads the zoo with tomllib)" >&2; exit 1; }
setup_ort
if ! "$PY" -c "import ray, onnxruntime, numpy, PIL; assert ray.__version__ == '$RAY_VERSION'" 2>/dev/null; then
  log "pip install ray[serve]==$RAY_VERSION onnxruntime==$ORT_VERSION numpy pillow into $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "ray[serve]==$RAY_VERSION" "onnxruntime==$ORT_VERSION" numpy pillow
fi
HAPROXY_MODE=$("$PY" -c 'from ray.serve._private import constants as c; print(int(hasattr(c, "RAY_SERVE_ENABLE_HA_PROXY") and hasattr(c, "RAY_SERVE_THROUGHPUT_OPTIMIZED")))')
if [ "$HAPROXY_MODE" != 1 ] && [[ ",$SYSTEMS," == *",ray-haproxy,"* ]]; then
  log "Ray $RAY_VERSION has no HAProxy mode (RAY_SERVE_ENABLE_HA_PROXY); skipping it"
  SYSTEMS="${SYSTEMS//ray-haproxy/}"
fi
log "cargo build --release (master, worker, benches)"
cargo build --release -q -p cocktail-master -p cocktail-worker -p cocktail-benches

# --- Ray ---------------------------------------------------------------------------
# The environment of one Ray mode, for `env`.
ray_env() {
  echo RAY_USAGE_STATS_ENABLED=0
  if [ "$1" = haproxy ]; then
    echo RAY_SERVE_THROUGHPUT_OPTIMIZED=1
    echo RAY_SERVE_ENABLE_HA_PROXY=1
  fi
}

# ray_up MODE: a one-node Ray instance in a Unix session of its own (so that every
# process it starts, however deep, can be found: RAY_SID), with the app deployed and
# answering. No dashboard (an operator's tool, not part of serving), a small object store
# (the tensors travel inline).
ray_up() {
  local mode="$1"
  mapfile -t vars < <(ray_env "$mode")
  env "${vars[@]}" setsid "$RAY" start --head --port="$GCS_PORT" --include-dashboard=false \
    --disable-usage-stats --object-store-memory=200000000 >"$OUT/ray-start.log" 2>&1 &
  RAY_SID=$!
  wait "$RAY_SID" || { cat "$OUT/ray-start.log" >&2; return 1; }
  pgrep -s "$RAY_SID" >/dev/null || { echo "no process of Ray's session $RAY_SID" >&2; return 1; }
  # Not /tmp/ray/session_latest: `ray start` does not always move that link.
  RAY_SESSION_DIR=$(ps -o args= -s "$RAY_SID" \
    | awk -F'--session-dir=' 'NF > 1 && !done { split($2, dir, " "); print dir[1]; done = 1 }')
  RAY_NODE_ID=$(ps -o args= -s "$RAY_SID" \
    | awk -F'--node-id=' 'NF > 1 && !done { split($2, id, " "); print id[1]; done = 1 }')
  env "${vars[@]}" "$PY" "$APP" --port "$PORT" >"$OUT/ray-app.log" 2>&1 \
    || { cat "$OUT/ray-app.log" >&2; return 1; }
}

# ray_down [keep]: `ray stop --force`, then whatever is left of the session (HAProxy
# outlives it); Ray's session directory (logs) goes too unless `keep` is given.
ray_down() {
  [ -n "$RAY_SID" ] || return 0
  "$RAY" stop --force >/dev/null 2>&1 || true
  local left
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    left=$(pgrep -s "$RAY_SID" || true)
    [ -z "$left" ] && break
    # shellcheck disable=SC2086
    kill $left 2>/dev/null || true
    sleep 0.5
  done
  left=$(pgrep -s "$RAY_SID" || true)
  # shellcheck disable=SC2086
  [ -z "$left" ] || kill -9 $left 2>/dev/null || true
  RAY_SID=""
  if [ "${1:-}" = keep ]; then
    log "Ray's logs: $RAY_SESSION_DIR/logs"
  else
    if [[ "$RAY_SESSION_DIR" == /tmp/ray/session_* ]]; then rm -rf "$RAY_SESSION_DIR"; fi
    # HAProxy mode's configuration, sockets and state, one directory per node.
    if [ -n "$RAY_NODE_ID" ]; then rm -rf "/tmp/haproxy-serve/$RAY_NODE_ID"; fi
  fi
}
# A run that did not finish leaves Ray's logs for a look.
trap 'ray_down keep; rm -rf "$OUT"' EXIT
trap 'exit 130' INT TERM

# --- Runs --------------------------------------------------------------------------
LOAD=(--requests "$REQUESTS" --warmup "$WARMUP" --expect-models 3)
ROWS=""
run() { # run SYSTEM CONCURRENCY
  local system="$1" c="$2" row header=()
  # The first row brings the table's header.
  [ -s "$ROWS" ] || header=(--header)
  case "$system" in
    cocktail)
      row=$("$BENCH" cocktail --concurrency "$c" "${LOAD[@]}" "${header[@]}") ;;
    ray|ray-haproxy)
      local mode=default name="Ray Serve (default proxy)"
      [ "$system" = ray-haproxy ] && mode=haproxy name="Ray Serve (HAProxy)"
      log "$name: starting Ray"
      ray_up "$mode"
      row=$("$BENCH" url --url "$URL" --system "$name" --session "$RAY_SID" \
        --concurrency "$c" "${LOAD[@]}" "${header[@]}")
      ray_down ;;
    *) echo "unknown system: $system" >&2; exit 2 ;;
  esac
  log "${row##*$'\n'}"
  echo "$row" >>"$ROWS"
}
IFS=',' read -r -a levels <<<"$CONCURRENCY"
IFS=',' read -r -a systems <<<"$SYSTEMS"
for r in $(seq 1 "$RUNS"); do
  [ "$RUNS" = 1 ] || log "run $r of $RUNS"
  ROWS="$OUT/rows-$r.md"
  : >"$ROWS"
  for c in "${levels[@]}"; do
    for system in "${systems[@]}"; do
      [ -n "$system" ] && run "$system" "$c"
    done
  done
done

# Issue 35's goals against Ray Serve in HAProxy mode: at 8 clients >= 10x its throughput
# with <= 0.4 ms of CPU per request; at 32 clients a p99 <= 0.3x its. The goal column
# judges the median run by them, the note each figure's median of the runs.
THROUGHPUT_GOAL=10
CPU_GOAL_MS=0.4
P99_GOAL=0.3

# --- The median run ----------------------------------------------------------------
# figures ROWS: a run's figures, tab-separated: Cocktail's throughput over Ray Serve's in
# HAProxy mode at 8 clients (the median run is chosen by it; 0 without those rows), then
# Cocktail's CPU per request and req/s there and Ray's req/s there.
figures() {
  awk -F'|' '
    function trim(s) { gsub(/^ +| +$/, "", s); return s }
    trim($3) == "8" { rps[trim($2)] = trim($6); cpu[trim($2)] = trim($9) }
    END {
      c = rps["Cocktail"]; r = rps["Ray Serve (HAProxy)"]
      printf "%s\t%s\t%s\t%s\n", (r + 0 > 0 ? sprintf("%.2f", c / r) : "0"),
        (cpu["Cocktail"] == "" ? "–" : cpu["Cocktail"]), (c == "" ? "–" : c), (r == "" ? "–" : r)
    }' "$1"
}
NOTE=""
if [ "$RUNS" -gt 1 ]; then
  MEDIAN=$(for r in $(seq 1 "$RUNS"); do printf '%s\t%s\n' "$(figures "$OUT/rows-$r.md" | cut -f1)" "$r"; done \
    | sort -g -k1,1 | sed -n "$((RUNS / 2 + 1))p" | cut -f2)
  ROWS="$OUT/rows-$MEDIAN.md"
  # quoted N [OP LIMIT]: figure N's values in the order the runs ran, then their median
  # (the upper one of an even count, picked as MEDIAN above; a "–" is quoted, not counted)
  # judged against the goal "OP LIMIT" (<= or >=) if given: the note median_run writes in
  # benches/src/measured.rs, for the Rust benchmarks.
  quoted() {
    local values median
    values=$(for r in $(seq 1 "$RUNS"); do figures "$OUT/rows-$r.md" | cut -f"$1"; done)
    printf '%s' "$(paste -sd, <<< "$values" | sed 's/,/, /g')"
    median=$({ grep -vx '–' <<< "$values" || true; } | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int(NR / 2) + 1] }')
    [ -n "$median" ] || return 0
    printf ' (median %s' "$median"
    [ -n "${2:-}" ] && awk -v m="$median" -v op="$2" -v limit="$3" 'BEGIN {
      met = (op == "<=") ? m + 0 <= limit + 0 : m + 0 >= limit + 0
      printf "; goal %s %s: %s", (op == "<=" ? "≤" : "≥"), limit, (met ? "met" : "not met") }'
    printf ')'
  }
  NOTE=" (run $MEDIAN of $RUNS, the median by the first figure below; each run's, in the order they ran, and each figure's median:"
  NOTE+=" Cocktail's throughput over Ray Serve's (HAProxy) at 8 clients $(quoted 1 '>=' "$THROUGHPUT_GOAL");"
  NOTE+=" Cocktail's CPU per request there (ms) $(quoted 2 '<=' "$CPU_GOAL_MS"); Cocktail's req/s there $(quoted 3);"
  NOTE+=" Ray Serve's (HAProxy) req/s there $(quoted 4))"
fi

# --- Report ------------------------------------------------------------------------
RAY_REPORTED=$("$PY" -c 'import ray; print(ray.__version__)')
echo
{
echo "Measured on $(date -u +%F) by \`scripts/peer-ray.sh $ARGS\`$NOTE."
echo
echo "Fashion ensemble cnn_med + mlp_med + lenet (majority vote), one replica/worker per"
echo "model, ONNX Runtime $ORT_VERSION with 1 intra-op thread; Ray $RAY_REPORTED; $(nproc) cores;"
echo "closed loop, $WARMUP warm-up + $REQUESTS measured requests per row, one base64 PNG each."
echo "CPU and memory are summed over all of a system's processes (see benches/peers/ray/README.md)."
echo
cat "$ROWS"
echo
echo "| concurrency | Cocktail / … | throughput | p99 | CPU per request | goal (issue 35) |"
echo "|---:|---|---:|---:|---:|---|"
awk -F'|' -v tput="$THROUGHPUT_GOAL" -v cpu_ms="$CPU_GOAL_MS" -v p99_goal="$P99_GOAL" '
  function trim(s) { gsub(/^ +| +$/, "", s); return s }
  function ratio(a, b) { return (b + 0 > 0) ? sprintf("%.2f×", a / b) : "–" }
  function said(met) { return met ? "met" : "not met" }
  trim($3) ~ /^[0-9]+$/ {
    name = trim($2); c = trim($3)
    rps[name, c] = trim($6); p99[name, c] = trim($8); cpu[name, c] = trim($9)
    if (!(c in seen)) { seen[c] = 1; order[++n] = c }
    if (name != "Cocktail" && !(name in peer)) { peer[name] = 1; peers[++m] = name }
  }
  END {
    for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) {
      c = order[i]; name = peers[j]
      if (!(("Cocktail", c) in rps) || !((name, c) in rps)) continue
      # Issue 35: THROUGHPUT_GOAL and the others above.
      goal = "-"
      if (name ~ /HAProxy/ && c == 8)
        goal = sprintf("throughput ≥ %s×: %s; CPU ≤ %s ms: %s", tput, said(rps["Cocktail", c] + 0 >= tput * rps[name, c]),
          cpu_ms, said(cpu["Cocktail", c] + 0 <= cpu_ms + 0))
      if (name ~ /HAProxy/ && c == 32)
        goal = sprintf("p99 ≤ %s×: %s", p99_goal, said(p99["Cocktail", c] + 0 <= p99_goal * p99[name, c]))
      printf "| %s | %s | %s | %s | %s | %s |\n", c, name, ratio(rps["Cocktail", c], rps[name, c]),
        ratio(p99["Cocktail", c], p99[name, c]), ratio(cpu["Cocktail", c], cpu[name, c]), goal
    }
  }' "$ROWS"
echo
echo "Throughput above 1× and p99 and CPU below 1× favour Cocktail."
echo
echo "Reproduce: \`scripts/peer-ray.sh --runs 3 --out docs\`."
} | tee "$REPORT"
