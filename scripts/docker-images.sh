#!/usr/bin/env bash
# Builds, without any container registry, the images that `docker/compose.ci.yml` runs:
#
#   debian:bookworm-slim     Debian bookworm from debootstrap (minbase, docs and locales
#                            dropped as in Debian's slim image), imported with `docker import`,
#                            so that docker/Dockerfile's `FROM debian:bookworm-slim` builds offline
#   cocktail/redis:ci        that base plus Debian's redis-server
#   cocktail/mongo-wire:ci   that base plus a MongoDB-wire server (PyPI secantusdb, GPL, run
#                            only as a separate server) in a venv
#   cocktail/prometheus:ci   that base plus Debian's prometheus (server and promtool)
#   cocktail-rs:ci           docker/Dockerfile's `prebuilt` target: the project's binaries built
#                            on this host (stripped), ONNX Runtime's library and the zoo
#
# Every package is fetched on the host (debootstrap, apt in a chroot, pip) and copied in;
# no build container reaches a registry. The four base images are kept as tarballs under
# .deps/docker/ and skipped while their tags exist, so only the first run pays for them.
#
# Usage: scripts/docker-images.sh [BIN_DIR]   (default: $CARGO_TARGET_DIR/debug or target/debug,
#        the binaries `cargo build --workspace --bins` leaves there)
# Environment: DEBIAN_MIRROR (default: the one apt is configured with), REBUILD_BASE=1 to
# redo the base images, COCKTAIL_IMAGE (default cocktail-rs:ci).
source "$(dirname "$0")/lib.sh"

CACHE="$DEPS/docker"
BIN_DIR="${1:-${CARGO_TARGET_DIR:-$ROOT/target}/debug}"
IMAGE="${COCKTAIL_IMAGE:-cocktail-rs:ci}"
SECANTUS_VERSION="0.7.0b3"
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"

command -v docker >/dev/null || { echo "docker not found" >&2; exit 1; }
docker info >/dev/null 2>&1 || { echo "the Docker daemon does not answer" >&2; exit 1; }
mkdir -p "$CACHE"

# rootfs_dir: a new directory for a root file system (mode 755: it becomes the image's `/`).
rootfs_dir() {
  local dir; dir=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  chmod 755 "$dir"
  echo "$dir"
}

# On any exit: unmount and delete the trees of an interrupted run (--one-file-system: never
# into a /dev or /proc still mounted).
cleanup() {
  local dir
  for dir in "$CACHE"/rootfs.*; do
    [ -d "$dir" ] || continue
    for m in dev proc; do mountpoint -q "$dir/$m" && $sudo umount "$dir/$m"; done
    $sudo rm -rf --one-file-system "$dir" || true
  done
}
trap cleanup EXIT

has_image() { docker image inspect "$1" >/dev/null 2>&1; }

# The first Debian mirror apt uses here (deb822 or one-line format).
debian_mirror() {
  [ -n "${DEBIAN_MIRROR:-}" ] && { echo "$DEBIAN_MIRROR"; return; }
  local uri
  uri=$(grep -rhoE '^(URIs:|deb) +[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
        | head -n 1 | awk '{print $2}')
  echo "${uri:-http://deb.debian.org/debian}"
}

# chroot_run ROOTFS CMD...: runs CMD in ROOTFS with /proc, /dev and the host's DNS, and no
# service started by a package's postinst.
chroot_run() {
  local rootfs="$1"; shift
  $sudo cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$rootfs/usr/sbin/policy-rc.d" >/dev/null
  $sudo chmod +x "$rootfs/usr/sbin/policy-rc.d"
  $sudo mount -t proc proc "$rootfs/proc"
  $sudo mount --bind /dev "$rootfs/dev"
  local status=0
  $sudo env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DEBIAN_FRONTEND=noninteractive \
    chroot "$rootfs" "$@" || status=$?
  $sudo umount "$rootfs/dev" "$rootfs/proc"
  $sudo rm -f "$rootfs/usr/sbin/policy-rc.d"
  : | $sudo tee "$rootfs/etc/resolv.conf" >/dev/null
  return $status
}

# slim ROOTFS: what Debian's slim images leave out (docs, man pages, locales, apt lists and
# caches), now and for packages installed later.
slim() {
  local rootfs="$1"
  $sudo tee "$rootfs/etc/dpkg/dpkg.cfg.d/docker" >/dev/null <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
  printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' \
    | $sudo tee "$rootfs/etc/apt/apt.conf.d/docker-no-recommends" >/dev/null
  $sudo find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
  $sudo find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
  $sudo rm -rf "$rootfs"/usr/share/{man,groff,info,lintian,linda,locale}/* \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* "$rootfs"/tmp/* \
    "$rootfs"/root/.cache
  $sudo find "$rootfs" -name __pycache__ -type d -prune -exec rm -rf {} +
}

# base_rootfs DIR: a fresh copy of the slim bookworm tree in DIR (debootstrap on the first run).
base_rootfs() {
  local dir="$1" tarball="$CACHE/bookworm-slim.tar"
  if [ ! -s "$tarball" ] || [ -n "${REBUILD_BASE:-}" ]; then
    apt_install debootstrap
    local mirror; mirror=$(debian_mirror)
    log "debootstrap --variant=minbase bookworm ($mirror)"
    local tmp; tmp=$(rootfs_dir)
    $sudo debootstrap --variant=minbase bookworm "$tmp" "$mirror" >"$CACHE/debootstrap.log" 2>&1 \
      || { tail -n 20 "$CACHE/debootstrap.log" >&2; $sudo rm -rf --one-file-system "$tmp"; exit 1; }
    echo 'deb '"$mirror"' bookworm main' | $sudo tee "$tmp/etc/apt/sources.list" >/dev/null
    slim "$tmp"
    $sudo tar --numeric-owner -C "$tmp" -cf "$tarball.part" .
    mv "$tarball.part" "$tarball"
    $sudo rm -rf --one-file-system "$tmp"
  fi
  mkdir -p "$dir"
  $sudo tar --numeric-owner -C "$dir" -xf "$tarball"
}

# service_image TAG TARBALL SETUP [--change ...]: TAG from the base tree after SETUP ROOTFS ran
# on it, cached as TARBALL.
service_image() {
  local tag="$1" tarball="$2" setup="$3"; shift 3
  if [ -n "${REBUILD_BASE:-}" ] || [ ! -s "$tarball" ]; then
    local tmp; tmp=$(rootfs_dir)
    base_rootfs "$tmp"
    "$setup" "$tmp"
    slim "$tmp"
    $sudo tar --numeric-owner -C "$tmp" -cf "$tarball.part" .
    mv "$tarball.part" "$tarball"
    $sudo rm -rf --one-file-system "$tmp"
  fi
  log "docker import $tag"
  docker import "$@" "$tarball" "$tag" >/dev/null
}

setup_redis() {
  local rootfs="$1"
  log "redis-server into the base (apt in a chroot)"
  chroot_run "$rootfs" sh -c 'apt-get update -qq && apt-get install -y -qq redis-server >/dev/null && apt-get clean'
}

setup_mongo_wire() {
  local rootfs="$1"
  log "secantusdb $SECANTUS_VERSION into the base (python3 from apt, wheels from pip on the host)"
  chroot_run "$rootfs" sh -c 'apt-get update -qq && apt-get install -y -qq python3 python3-venv >/dev/null && apt-get clean'
  # The wheels come from the host's pip (same Python 3.11, same platform), then install offline.
  $sudo mkdir -p "$rootfs/tmp/wheels"
  python3 -m pip download -q --only-binary :all: --python-version 3.11 --platform manylinux2014_x86_64 \
    --platform "manylinux_2_28_x86_64" --platform "manylinux_2_17_x86_64" \
    -d "$rootfs/tmp/wheels" "secantusdb==$SECANTUS_VERSION"
  chroot_run "$rootfs" sh -c 'python3 -m venv /opt/secantus \
    && /opt/secantus/bin/pip install -q --no-index --find-links /tmp/wheels secantusdb \
    && /opt/secantus/bin/pip uninstall -q -y pip setuptools \
    && useradd --system --no-create-home --shell /usr/sbin/nologin mongo'
  $sudo rm -rf "$rootfs/tmp/wheels"
}

setup_prometheus() {
  local rootfs="$1"
  log "prometheus into the base (apt in a chroot)"
  chroot_run "$rootfs" sh -c 'apt-get update -qq && apt-get install -y -qq prometheus >/dev/null && apt-get clean'
}

if ! has_image debian:bookworm-slim || [ -n "${REBUILD_BASE:-}" ]; then
  tmp=$(rootfs_dir)
  base_rootfs "$tmp"
  $sudo rm -rf --one-file-system "$tmp"
  log "docker import debian:bookworm-slim"
  docker import --change 'CMD ["bash"]' "$CACHE/bookworm-slim.tar" debian:bookworm-slim >/dev/null
fi
if ! has_image cocktail/redis:ci || [ -n "${REBUILD_BASE:-}" ]; then
  service_image cocktail/redis:ci "$CACHE/redis.tar" setup_redis \
    --change 'USER redis' --change 'EXPOSE 6379' \
    --change 'CMD ["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no"]'
fi
if ! has_image cocktail/mongo-wire:ci || [ -n "${REBUILD_BASE:-}" ]; then
  service_image cocktail/mongo-wire:ci "$CACHE/mongo-wire.tar" setup_mongo_wire \
    --change 'USER mongo' --change 'EXPOSE 27017' \
    --change 'CMD ["/opt/secantus/bin/secantusd-py", "--host", "0.0.0.0", "--port", "27017", "--storage-path", ":memory:", "--standalone"]'
fi
if ! has_image cocktail/prometheus:ci || [ -n "${REBUILD_BASE:-}" ]; then
  # Debian's defaults (its systemd unit's), except the configuration, which compose mounts.
  service_image cocktail/prometheus:ci "$CACHE/prometheus.tar" setup_prometheus \
    --change 'USER prometheus' --change 'EXPOSE 9090' --change 'WORKDIR /var/lib/prometheus' \
    --change 'ENTRYPOINT ["/usr/bin/prometheus"]' \
    --change 'CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/var/lib/prometheus/metrics2"]'
fi

# The project's image from the binaries built on this host, in a small build context of its
# own: stripped binaries, ONNX Runtime's library and the zoo's runtime files.
for bin in cocktail-master cocktail-worker; do
  [ -x "$BIN_DIR/$bin" ] || { echo "$BIN_DIR/$bin is missing: run cargo build --workspace --bins" >&2; exit 1; }
done
[ -f "$ORT_LIB" ] || setup_ort
context="$CACHE/context"
rm -rf "$context"
mkdir -p "$context/bin" "$context/lib"
for bin in cocktail-master cocktail-worker; do
  strip --strip-all -o "$context/bin/$bin" "$BIN_DIR/$bin"
done
cp "$ORT_LIB" "$context/lib/"
cp -a "$ROOT/models" "$context/models"
rm -rf "$context/models/train"
log "docker build --target prebuilt -t $IMAGE"
previous=$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
docker build -q --target prebuilt -t "$IMAGE" -f "$ROOT/docker/Dockerfile" "$context" >/dev/null
# The image the tag leaves behind would pile up, one per change of the binaries.
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect --format '{{.Id}}' "$IMAGE")" ]; then
  docker rmi "$previous" >/dev/null 2>&1 || true
fi
rm -rf "$context"

log "images (${SECONDS} s)"
docker image ls --format '{{.Repository}}:{{.Tag}}\t{{.Size}}' \
  | grep -E '^(debian:bookworm-slim|cocktail/redis:ci|cocktail/mongo-wire:ci|cocktail/prometheus:ci|'"$IMAGE"')\b' >&2
