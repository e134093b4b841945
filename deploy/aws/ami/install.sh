#!/bin/bash
# The AMI recipe: run as root on a fresh x86_64 Debian 12 or Amazon Linux 2023 instance,
# then make an image of it (deploy/aws/ami/README.md). It installs
#
#   /opt/cocktail/{bin,lib,models}      the release tarball (deploy/aws/ami/build-tarball.sh)
#   /usr/local/bin/cocktail-master      wrappers that set ORT_DYLIB_PATH and COCKTAIL_ZOO
#   /usr/local/bin/cocktail-worker      (unless already set) and run the binaries: the
#                                       boot scripts run them with a bare environment
#   the AWS CLI                         the boot scripts read the secrets with it
#   curl                                they read the instance metadata (IMDSv2) with it
#   the system user `cocktail`          the master's service runs as it
#
# and checks that a worker starts (ONNX Runtime loads, the zoo is found).
#
# Usage: sudo ./install.sh cocktail-rs-VERSION-x86_64-linux.tar.gz
set -euo pipefail

tarball="${1:-}"
[ -f "$tarball" ] || { echo "usage: $0 cocktail-rs-VERSION-x86_64-linux.tar.gz" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "run it as root (sudo)" >&2; exit 1; }
[ "$(uname -m)" = x86_64 ] || { echo "the tarball's binaries are x86_64" >&2; exit 1; }

ORT_VERSION=1.31.1
PREFIX=/opt/cocktail

# The AWS CLI and curl, from the distribution.
. /etc/os-release
case "$ID" in
  debian)
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq awscli curl ca-certificates >/dev/null
    ;;
  amzn)
    # Amazon Linux 2023 ships both; install them if the image was trimmed.
    command -v aws >/dev/null || dnf install -y -q awscli-2
    command -v curl >/dev/null || dnf install -y -q curl-minimal
    ;;
  *)
    echo "$PRETTY_NAME: untested; install the AWS CLI and curl, then rerun" >&2
    command -v aws >/dev/null && command -v curl >/dev/null || exit 1
    ;;
esac

# The release, owned by root and read-only to everyone else.
rm -rf "$PREFIX.new"
mkdir -p "$PREFIX.new"
tar -xzf "$tarball" -C "$PREFIX.new" --strip-components=1 --no-same-owner
chown -R root:root "$PREFIX.new"
chmod -R go-w "$PREFIX.new"
rm -rf "$PREFIX.old"
[ -d "$PREFIX" ] && mv "$PREFIX" "$PREFIX.old"
mv "$PREFIX.new" "$PREFIX"
rm -rf "$PREFIX.old"

for b in cocktail-master cocktail-worker; do
  cat > "/usr/local/bin/$b" <<WRAPPER
#!/bin/sh
# Installed by deploy/aws/ami/install.sh ($(cat "$PREFIX/VERSION")).
: "\${ORT_DYLIB_PATH:=$PREFIX/lib/libonnxruntime.so.$ORT_VERSION}"
: "\${COCKTAIL_ZOO:=$PREFIX/models/zoo.toml}"
export ORT_DYLIB_PATH COCKTAIL_ZOO
exec $PREFIX/bin/$b "\$@"
WRAPPER
  chmod 755 "/usr/local/bin/$b"
done

# The master's service user (deploy/aws/cocktail.yaml runs cocktail-master as it); its
# state folder is made by systemd (StateDirectory=cocktail).
if ! id cocktail >/dev/null 2>&1; then
  useradd --system --user-group --home-dir /var/lib/cocktail --no-create-home \
    --shell "$(command -v nologin || echo /bin/false)" cocktail
fi

# A worker must start: the library loads, the zoo is found, the model answers health.
cocktail-master --version
cocktail-worker --version
log="$(mktemp)"
timeout 60 cocktail-worker --model linear --host 127.0.0.1 --port 0 >"$log" 2>&1 &
worker=$!
for _ in $(seq 1 60); do
  grep -q 'serving `linear`' "$log" && break
  kill -0 "$worker" 2>/dev/null || break
  sleep 1
done
if grep -q 'serving `linear`' "$log"; then
  echo "cocktail-worker starts: $(grep -m 1 'serving `linear`' "$log")"
  kill "$worker" 2>/dev/null || true
  wait "$worker" 2>/dev/null || true
  rm -f "$log"
else
  cat "$log" >&2
  echo "cocktail-worker did not start" >&2
  exit 1
fi
aws --version
echo "installed $(cat "$PREFIX/VERSION") in $PREFIX"
