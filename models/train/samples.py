"""Writes the README samples and the preprocessing fixture from the committed test sets.
Run it after fashion.py and sentiment.py (it imports their data and tokenizer code):

    .deps/train-venv/bin/python models/train/samples.py

    models/samples/fashion/NNNN_<class>.png  the first test image of each class
    models/samples/sentiment.tsv             three positive and three negative test sentences
    models/samples/preprocessed.json         the tensors and token ids the training code
                                             itself makes of them (worker/tests/preprocess.rs
                                             checks the worker makes the same)
"""

import json
import os
import sys
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion  # noqa: E402  (load_split, read_idx)
import sentiment  # noqa: E402  (make_tokenizer, tokenize)

MODELS = Path(__file__).resolve().parents[1]


def fashion_test():
    data = MODELS / "data" / "fashion"
    images = fashion.read_idx(str(data / "t10k-images-idx3-ubyte.gz"))
    labels = fashion.read_idx(str(data / "t10k-labels-idx1-ubyte.gz")).astype(np.int64)
    return images, labels


def sentiment_test():
    lines = (MODELS / "data" / "sentiment" / "test.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "label\tsource\ttext", lines[0]
    rows = [line.split("\t", 2) for line in lines[1:]]
    return [r[2] for r in rows], np.array([int(r[0]) for r in rows], dtype=np.int64)


def write_samples(images, labels, texts, text_labels):
    png_dir = MODELS / "samples" / "fashion"
    png_dir.mkdir(parents=True, exist_ok=True)
    pngs = []
    for cls, name in enumerate(fashion.LABELS):
        i = int(np.flatnonzero(labels == cls)[0])
        slug = name.lower().replace("/", "-").replace(" ", "-")
        path = png_dir / f"{i:04d}_{slug}.png"
        Image.fromarray(images[i], mode="L").save(path)
        pngs.append((i, path))
    picks = [i for i, t in enumerate(texts) if 30 <= len(t) <= 120]
    chosen = [i for i in picks if text_labels[i] == 1][:3] + [i for i in picks if text_labels[i] == 0][:3]
    with open(MODELS / "samples" / "sentiment.tsv", "w", encoding="utf-8") as f:
        f.write("label\ttext\n")
        for i in chosen:
            f.write(f"{sentiment.LABELS[text_labels[i]]}\t{texts[i]}\n")
    write_preprocessing_fixture(pngs, [texts[i] for i in chosen])


def write_preprocessing_fixture(pngs, sentences):
    """The tensors the training pipelines themselves make of the samples, so a Rust test
    can prove that the worker's preprocessing is the same (`worker/tests/preprocess.rs`)."""
    test_images, _ = fashion.load_split("t10k")
    ids = sentiment.tokenize(sentiment.make_tokenizer(), sentences)
    fixture = {
        "fashion": [{"png": str(path.relative_to(MODELS)), "tensor": test_images[i].ravel().tolist()}
                    for i, path in pngs],
        "sentiment": [{"text": t, "input_ids": e.tolist()} for t, e in zip(sentences, ids)],
    }
    (MODELS / "samples" / "preprocessed.json").write_text(json.dumps(fixture), encoding="utf-8")


def main():
    images, labels = fashion_test()
    texts, text_labels = sentiment_test()
    write_samples(images, labels, texts, text_labels)
    print(f"wrote {MODELS / 'samples'}")


if __name__ == "__main__":
    main()
