"""Writes the first COUNT items of an IDX image set (Fashion-MNIST's format) as an
ImageFolder, PNG files in OUT/<class name>/, the layout `cocktail zoo evaluate --data`
reads. Class names come from LABELS, one per line, in class-id order.

    python idx_to_image_folder.py IMAGES.gz LABELS.gz --labels LABELS.txt --out OUT [--count N]
"""

import argparse
import gzip
import struct
from pathlib import Path

import numpy as np
from PIL import Image


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(f">{dims}I", data[4 : 4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("images")
    parser.add_argument("labels")
    parser.add_argument("--labels", dest="names", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--count", type=int, default=1000)
    args = parser.parse_args()
    names = Path(args.names).read_text().splitlines()
    images, labels = idx(args.images)[: args.count], idx(args.labels)[: args.count]
    for i, (image, label) in enumerate(zip(images, labels)):
        folder = Path(args.out) / names[label]
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image).save(folder / f"{i:05}.png")
    print(f"{len(images)} images in {len(set(labels.tolist()))} class folders under {args.out}/")


if __name__ == "__main__":
    main()
