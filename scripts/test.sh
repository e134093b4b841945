#!/usr/bin/env bash
# Sets up and passes every check: formatting, clippy with warnings as errors, and every
# test (unit, integration, black-box) against real ONNX Runtime. `.ci/run` runs this.
source "$(dirname "$0")/lib.sh"
# CI builds are cold: incremental state would only take disk (a CI machine once ran out
# of it while building), so it is off unless the caller sets it.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
df -h "$ROOT" | tail -n 1 >&2
"$ROOT/scripts/setup.sh"
setup_ort
# The master's tests run a real Redis (the shared model cache); they start their own.
apt_install redis-server
# ... and curl (tests/tests/readme.rs runs the README's and docs' requests as written).
apt_install curl
# ... and the font the plots are drawn with.
apt_install fonts-dejavu-core
# ... and a headless browser (tests/tests/dashboard.rs loads /dashboard in it).
apt_install chromium
# ... and promtool (tests/tests/prometheus_rules.rs checks deploy/prometheus/ with it).
apt_install prometheus
# ... and a MongoDB-wire server (the controller's state store).
setup_mongo
# ... and the EC2 emulator (the ec2 provider's tests).
setup_moto
# ... and schemathesis (the API conformance tests fuzz master and worker with it).
setup_schemathesis
# ... and tritonclient (tests/tests/oip_clients.rs: the standard OIP client, HTTP and gRPC).
setup_tritonclient
# ... and cfn-lint (the AWS stack's template is linted by tests/tests/deploy_aws.rs).
setup_cfn_lint
# ... and cargo-nextest, which runs the tests.
setup_nextest
cd "$ROOT"
log "cargo fmt --check"
cargo fmt --all --check
log "cargo clippy"
cargo clippy --workspace --all-targets --features cocktail-tests/ec2 --locked -- -D warnings
log "cargo build (the binaries the black-box tests start)"
cargo build --workspace --bins --features cocktail-tests/ec2,cocktail-master/ec2 --locked
# The compose test's images (offline: debootstrap, a chroot, the binaries just built),
# cached under .deps/docker and by the daemon; without docker the compose test fails,
# naming the install step.
if command -v docker >/dev/null; then
  "$ROOT/scripts/docker-images.sh"
fi
# Every test, two at a time across the test binaries (.config/nextest.toml names the
# live tests that keep the machine to themselves), then the documentation's examples,
# which nextest does not run.
#
# The two longest tests, the results page and the zoo rebuild, are CPU-bound and
# deterministic (they compare what they compute with committed files, never a time), so
# they run in a second nextest at the kernel's idle priority (SCHED_IDLE: they get a core
# only when nothing else wants it), beside the first. The live tests that run alone leave
# most of the machine idle (they wait on emulated time; about a quarter of a core over
# their 17 minutes, in a run here), and these two use it, where they used to run after
# them and hold the machine for 11 minutes.
log "cargo nextest run"
nextest=(cargo nextest run --workspace --features cocktail-tests/ec2 --locked)
"${nextest[@]}" --no-run
IDLE_TESTS='binary(=results_page) | test(the_projects_zoo_is_rebuilt_by_the_commands)'
# Its lines are marked `[idle]` among the first's. Where the scheduler refuses SCHED_IDLE
# (a container's seccomp profile may), nice 19 is the nearest.
idle=(chrt --idle 0)
"${idle[@]}" true 2>/dev/null || idle=(nice -n 19)
"${idle[@]}" "${nextest[@]}" -E "$IDLE_TESTS" > >(sed -u 's/^/[idle] /') 2>&1 &
idle_pid=$!
status=0
"${nextest[@]}" -E "not ($IDLE_TESTS)" || status=$?
idle_status=0
wait "$idle_pid" || idle_status=$?
[ "$status" -eq 0 ] && [ "$idle_status" -eq 0 ] || exit 1
log "cargo test --doc"
cargo test --workspace --doc --features cocktail-tests/ec2 --locked
# Disk left for the fuzz build (a full disk once killed its linker), and what the
# workspace's build took.
df -h "$ROOT" | tail -n 1 >&2
du -sh "$ROOT/target" >&2
# Every parser of untrusted bytes, fuzzed for 20 s per target from the committed corpora
# (20, not 30: CI runs close to its 60-minute budget).
FUZZ_DEV=1 "$ROOT/scripts/fuzz.sh" 20

# CI timing: every step above logged the time it started; this is when the run ended.
log "every check passed"
