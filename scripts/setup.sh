#!/usr/bin/env bash
# Sets up what running Cocktail-rs needs on a fresh machine: the ONNX Runtime shared
# library from the PyPI wheel onnxruntime==1.31.1, unpacked into .deps/ (git-ignored).
# The models, test data and tokenizer are committed under models/.
source "$(dirname "$0")/lib.sh"
command -v cargo >/dev/null || { echo "cargo not found: install Rust with rustup" >&2; exit 1; }
setup_ort
log "ONNX Runtime: $ORT_DYLIB_PATH"
