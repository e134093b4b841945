#!/usr/bin/env bash
# Rebuilds the project's zoo manifest and recorded predictions with `cocktail zoo` alone,
# from what the training scripts exported next to the ONNX files (models/<task>/*.onnx,
# models.tsv, labels.txt or config.json, sentiment/tokenizer.json) and the committed test
# sets (models/data/):
#
#   models/build-zoo.sh                 # rewrites models/zoo.toml and models/predictions/
#                                       # (with fashion-c/, the answers on the corrupted sets)
#   models/build-zoo.sh DIR             # a complete zoo in DIR (new, or without zoo.toml)
#   models/build-zoo.sh --profile [DIR] # and re-measures every profile on this machine
#
# A model keeps the [models.profile] the committed models/zoo.toml has for it while its
# file's sha256 is unchanged (`cocktail zoo add --profile-from`); `--profile` measures
# them all again. models/zoo.toml and models/predictions/ are replaced only once the
# whole build has succeeded (a failed build into DIR leaves DIR incomplete).
#
# COCKTAIL_BIN: the cocktail binary to run (default: built with cargo, target/debug).
source "$(dirname "$0")/../scripts/lib.sh"

SRC="$ROOT/models"
TASKS=(fashion sentiment)
profile=0
target="$SRC"
for arg in "$@"; do
  case "$arg" in
    --profile) profile=1 ;;
    -*) echo "usage: $0 [--profile] [DIR]" >&2; exit 2 ;;
    *) target="$arg" ;;
  esac
done

export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$ORT_LIB}"
if [ ! -f "$ORT_DYLIB_PATH" ]; then
  echo "ONNX Runtime is not at $ORT_DYLIB_PATH: run scripts/setup.sh first" >&2
  exit 1
fi
if [ -z "${COCKTAIL_BIN:-}" ]; then
  log "cargo build -p cocktail"
  (cd "$ROOT" && cargo build -q -p cocktail --locked)
  COCKTAIL_BIN="$ROOT/target/debug/cocktail"
fi

# place FILE DIR: a copy of FILE in DIR (not a hard link: the zoo's files are its own).
place() {
  mkdir -p "$2"
  cp --reflink=auto "$1" "$2/"
}

# cocktail ARGS: the binary on the zoo being built (in $zoo).
cocktail() { "$COCKTAIL_BIN" --zoo "$zoo/zoo.toml" "$@"; }

# build DIR OLD: the whole zoo in the empty folder DIR, keeping OLD's profiles.
build() {
  zoo="$1"
  local old="$2" task name params examples epochs arch description keep=()
  [ -f "$old" ] && keep=(--profile-from "$old")
  # The models and the tokenizer go where the manifest names them: `add` references
  # files inside the zoo's folder where they are.
  for task in "${TASKS[@]}"; do
    for name in $(tail -n +2 "$SRC/$task/models.tsv" | cut -f 1); do
      place "$SRC/$task/$name.onnx" "$zoo/$task"
    done
  done
  place "$SRC/sentiment/tokenizer.json" "$zoo/sentiment"

  log "$zoo: tasks"
  (cd "$zoo" && "$COCKTAIL_BIN" zoo init . --task fashion --labels "$SRC/fashion/config.json" \
    --test-idx "$SRC/data/fashion/t10k-images-idx3-ubyte.gz" \
    "$SRC/data/fashion/t10k-labels-idx1-ubyte.gz")
  (cd "$zoo" && "$COCKTAIL_BIN" zoo init . --task sentiment --labels "$SRC/sentiment/labels.txt" \
    --test-tsv "$SRC/data/sentiment/test.tsv")

  for task in "${TASKS[@]}"; do
    log "$zoo: $task models"
    local how=()
    case "$task" in
      fashion) how=(--preprocess-from "$SRC/fashion/config.json") ;;
      # sentiment.py's MAX_LEN: the tokenizer truncates at 128 tokens.
      sentiment) how=(--tokenizer "$zoo/sentiment/tokenizer.json" --max-tokens 128) ;;
    esac
    # --accuracy is a placeholder: `evaluate` measures it on the test set below.
    while IFS=$'\t' read -r name params examples epochs arch description; do
      cocktail zoo add "$zoo/$task/$name.onnx" --task "$task" "${how[@]}" --accuracy 0 \
        --arch "$arch" --description "$description" --params "$params" \
        --train-examples "$examples" --epochs "$epochs" "${keep[@]}"
    done < <(tail -n +2 "$SRC/$task/models.tsv")
    log "$zoo: evaluating the $task models on the test set"
    cocktail zoo evaluate --task "$task"
  done

  # The corrupted copies of the fashion test set's scored half (models/train/corrupt.py):
  # every model's answers and probability vectors on each, for the `fashion-corruptions`
  # drift schedule.
  local images name
  for images in "$SRC"/data/fashion-c/*-images-idx3-ubyte.gz; do
    name="$(basename "$images" -images-idx3-ubyte.gz)"
    log "$zoo: fashion models on $name"
    cocktail zoo record --task fashion --images "$images" \
      --labels "$SRC/data/fashion-c/$name-labels-idx1-ubyte.gz" \
      --out "$zoo/predictions/fashion-c/$name.tsv.gz"
  done
}

if [ -e "$target/zoo.toml" ]; then
  if [ "$(cd "$target" && pwd -P)" != "$(cd "$SRC" && pwd -P)" ]; then
    echo "$target already holds a zoo.toml: give a new folder (or none, for models/)" >&2
    exit 1
  fi
  # Built beside the manifest, then moved over it: a failed build changes nothing.
  stage="$(mktemp -d "$target/.build-zoo.XXXXXX")"
  trap 'rm -rf "$stage"' EXIT
  build "$stage" "$target/zoo.toml"
  mkdir -p "$target/predictions"
  for task in "${TASKS[@]}"; do
    mv "$stage/predictions/$task.tsv.gz" "$target/predictions/$task.tsv.gz"
    mv "$stage/predictions/$task.probabilities.tsv.gz" \
      "$target/predictions/$task.probabilities.tsv.gz"
  done
  rm -rf "$target/predictions/fashion-c"
  mv "$stage/predictions/fashion-c" "$target/predictions/fashion-c"
  mv "$stage/zoo.toml" "$target/zoo.toml"
else
  mkdir -p "$target"
  build "$target" "$SRC/zoo.toml"
fi
log "wrote $target/zoo.toml and $target/predictions/"

if [ "$profile" = 1 ]; then
  log "measuring every model's profile on this machine"
  "$COCKTAIL_BIN" --zoo "$target/zoo.toml" profile
fi
