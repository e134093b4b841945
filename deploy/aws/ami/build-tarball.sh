#!/usr/bin/env bash
# Builds the release tarball that deploy/aws/ami/install.sh installs on an instance:
#
#   cocktail-rs/bin/cocktail-master     release build with the `ec2` feature, stripped
#   cocktail-rs/bin/cocktail-worker     release build, stripped
#   cocktail-rs/lib/libonnxruntime.so.1.31.1   from .deps/ (scripts/setup.sh fetches it)
#   cocktail-rs/models/                 the zoo: manifest, ONNX files, tokenizer, test sets,
#                                       recorded predictions (models/train left out)
#   cocktail-rs/install.sh, VERSION
#
# into target/dist/cocktail-rs-VERSION-x86_64-linux.tar.gz (or DIST_DIR). The binaries need
# the glibc of the machine that built them or newer (printed at the end): Debian 12 and
# Amazon Linux 2023 instances both run what a Debian 12 host builds.
#
# Usage: deploy/aws/ami/build-tarball.sh
source "$(dirname "$0")/../../../scripts/lib.sh"
setup_ort
cd "$ROOT"

[ "$(uname -m)" = x86_64 ] || { echo "build on x86_64: the AMI recipe and the catalog's instance types are x86_64" >&2; exit 1; }
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
git diff --quiet HEAD 2>/dev/null || commit="$commit-dirty"
name="cocktail-rs-$version-$commit-x86_64-linux"
dist="${DIST_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/dist}"

log "cargo build --release (cocktail-master with the ec2 provider, cocktail-worker)"
cargo build --release --locked -p cocktail-master -p cocktail-worker --features cocktail-master/ec2 --bins
release="${CARGO_TARGET_DIR:-$ROOT/target}/release"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/cocktail-rs"
mkdir -p "$root/bin" "$root/lib"
for b in cocktail-master cocktail-worker; do
  strip -o "$root/bin/$b" "$release/$b"
done
cp "$ORT_LIB" "$root/lib/"
cp -a "$ROOT/models" "$root/models"
rm -rf "$root/models/train"
find "$root/models" -name __pycache__ -prune -exec rm -rf {} +
cp "$ROOT/deploy/aws/ami/install.sh" "$root/install.sh"
printf '%s\n' "$name" > "$root/VERSION"

mkdir -p "$dist"
tarball="$dist/$name.tar.gz"
tar -C "$stage" --owner=0 --group=0 -czf "$tarball" cocktail-rs
glibc="$(objdump -T "$root/bin/cocktail-master" "$root/bin/cocktail-worker" 2>/dev/null \
  | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1 || true)"
log "$tarball ($(du -h "$tarball" | cut -f1)); the binaries need ${glibc:-an unknown glibc} or newer"
echo "$tarball"
