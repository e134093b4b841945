#!/usr/bin/env python3
"""Corrupted copies of the scored half of the Fashion-MNIST test set (MNIST-C's parameters).

Usage (from anywhere; numpy only, the training venv has it):
    .deps/train-venv/bin/python models/train/corrupt.py          # (re)write the files
    .deps/train-venv/bin/python models/train/corrupt.py --check  # regenerate in memory, fail
                                                                  # if a committed file differs

Input:  models/data/fashion/t10k-{images-idx3,labels-idx1}-ubyte.gz (10,000 items); the
        scored half is test items 5000..9999, in order.
Output: models/data/fashion-c/NAME-images-idx3-ubyte.gz (5000x28x28 uint8, IDX3) and
        NAME-labels-idx1-ubyte.gz (the same 5000 labels, IDX1) for each NAME in SETS, gzip'd
        with mtime 0 and no file name so that the bytes depend only on the pixels; and
        models/data/fashion-c/README.md with their sha256.  CI never runs this script: the
        files are committed, and `models/build-zoo.sh` records the models' answers on them.

The corruptions are those of MNIST-C (Mu & Gilmer 2019, "MNIST-C: A Robustness Benchmark
for Computer Vision", arXiv:1906.02337), whose code is google-research/mnist-c
`corruptions.py` (https://github.com/google-research/mnist-c/blob/master/corruptions.py,
commit bba57e4ccc282f106907c5239958e72298451ea7).  Each function below keeps that file's
per-severity parameter table verbatim (`c = [...][severity - 1]`) and its arithmetic (on
x/255 in float64, clipped to [0, 1], times 255, float32), and differs only where stated:

  - randomness: MNIST-C draws from numpy's global legacy RandomState; here each set has its
    own `np.random.default_rng(SEED + index)` (index = its place in SETS), drawn once for the
    whole set in item order, so two runs give byte-identical files;
  - motion blur: MNIST-C calls ImageMagick's MotionBlurImage through Wand; here that routine
    is re-implemented in numpy (see motion_blur);
  - brightness and rotate: MNIST-C calls scikit-image (rgb2hsv/hsv2rgb/rgb2gray, and
    AffineTransform + warp); here the same arithmetic is written out in numpy for a grey
    image, so that the script needs numpy alone (see each function);
  - MNIST-C's functions return float32 images and its repository does not include the
    step that stored them as uint8; here the float32 image is clipped to [0, 255] and cast
    with .astype(np.uint8) (truncation), as Fashion-MNIST-C's generator.py does
    (`np.array(corrupted).astype(np.uint8)`), see to_uint8.

"inverse" is MNIST-C's `inverse` (255. - x, no severity), which Fashion-MNIST-C (Weiss &
Tonella, ISSTA 2022; https://github.com/testingautomated-usi/fashion-mnist-c, commit
3892c9e206026fd300fe38cb83c9e38059a5464e: mnist_c.py `inverse`, plus the flips and turns of
additional_corruptions.py) keeps unchanged.
"""
import argparse
import gzip
import hashlib
import io
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from idx import read_idx  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SRC_DIR = os.path.join(ROOT, "models", "data", "fashion")
OUT_DIR = os.path.join(ROOT, "models", "data", "fashion-c")
FIRST, COUNT = 5000, 5000  # the scored half: test items 5000..9999
SEED = 1906  # arXiv:1906.02337; set i draws from np.random.default_rng(SEED + i)


# ----------------------------------------------------------------------------- corruptions
# Each takes the clean images (N, 28, 28) uint8 and a Generator, and returns (N, 28, 28)
# float32 in [0, 255], as MNIST-C's function of the same name returns for one image.

def shot_noise(x, rng, severity):
    # MNIST-C: c = [60, 25, 12, 5, 3][severity - 1]; severity 1 -> c = 60.
    #   x = np.clip(np.random.poisson(x/255 * c) / float(c), 0, 1) * 255
    c = [60, 25, 12, 5, 3][severity - 1]
    x = np.asarray(x) / 255.
    x = np.clip(rng.poisson(x * c) / float(c), 0, 1) * 255
    return x.astype(np.float32)


def _motion_kernel(radius, sigma):
    """ImageMagick 6's GetOptimalKernelWidth1D + GetMotionBlurKernel (magick/effect.c).

    For radius > 0 the width is 2*ceil(radius) + 1 (radius 15 -> 31 taps); tap i weighs
    exp(-i^2 / (2 sigma^2)) / (sqrt(2 pi) sigma), normalised to sum 1: a one-sided
    Gaussian, so the blur trails behind each pixel in one direction only.
    """
    width = int(2.0 * math.ceil(radius) + 1.0)
    i = np.arange(width, dtype=np.float64)
    kernel = np.exp(-(i * i) / (2.0 * sigma * sigma)) / (math.sqrt(2.0 * math.pi) * sigma)
    return kernel / kernel.sum()


def _motion_offsets(width, angle):
    """ImageMagick 6's MotionBlurImage offset table for one angle (degrees):
    point = (width sin a, width cos a); tap i reads the pixel at
    (x + ceil(i*point.y/|point| - 0.5), y + ceil(i*point.x/|point| - 0.5))."""
    a = angle * math.pi / 180.0  # DegreesToRadians: MagickPI*degrees/180
    px, py = width * math.sin(a), width * math.cos(a)
    h = math.hypot(px, py)
    ox = [int(math.ceil(i * py / h - 0.5)) for i in range(width)]
    oy = [int(math.ceil(i * px / h - 0.5)) for i in range(width)]
    return np.array(ox), np.array(oy)


def motion_blur(x, rng, severity):
    # MNIST-C: c = [(10, 3), (15, 5), (15, 8), (15, 12), (20, 15)][severity - 1]
    #   (radius, sigma); severity 2 -> radius 15, sigma 5;
    #   angle = np.random.uniform(-45, 45) per image;
    #   Wand MagickMotionBlurImage(radius, sigma, angle) on the 8-bit grey PNG, decoded back
    #   to uint8 with cv2.imdecode.
    # Re-implementation of ImageMagick 6's MotionBlurImage (magick/effect.c; the version
    # Wand loads on Debian/Ubuntu), as imagenet-c's `_motion_blur` (bethgelab/imagecorruptions
    # corruptions.py) does with shifted copies.  Same kernel (31 one-sided Gaussian taps,
    # sigma 5), same integer offset table along the angle, same border rule (ImageMagick's
    # default "edge" virtual pixels: a tap that falls outside repeats the nearest border
    # pixel), same rounding back to 8 bits (Q16: ClampToQuantum(257 * sum) then
    # ScaleQuantumToChar).  How it differs: ImageMagick sums in its own loop order and may
    # run HDRI/Q8 builds with other rounding; imagecorruptions stops at taps that leave the
    # image (weight < 1e-6 here), while this, like ImageMagick, keeps them with edge pixels.
    # Checked: on all 5000 images with these angles, `convert -motion-blur 15x5+ANGLE`
    # (ImageMagick 6.9.11-60 Q16, Debian 12) gives the same uint8 pixels, 0 differing.
    radius, sigma = [(10, 3), (15, 5), (15, 8), (15, 12), (20, 15)][severity - 1]
    kernel = _motion_kernel(radius, sigma)
    width = len(kernel)
    angles = rng.uniform(-45, 45, size=len(x))
    n, rows, cols = x.shape
    yy = np.arange(rows)[None, :, None]
    xx = np.arange(cols)[None, None, :]
    out = np.empty(x.shape, dtype=np.float32)
    src = np.asarray(x, dtype=np.float64)
    for j in range(n):
        ox, oy = _motion_offsets(width, float(angles[j]))
        r = np.clip(yy + oy[:, None, None], 0, rows - 1)
        c = np.clip(xx + ox[:, None, None], 0, cols - 1)
        taps = src[j][r, c]  # (width, rows, cols)
        s = np.zeros((rows, cols), dtype=np.float64)
        for i in range(width):  # ImageMagick's order: tap 0 first
            s += kernel[i] * taps[i]
        # Q16 non-HDRI: Quantum = (Quantum)(257*s + 0.5) clamped, then 8-bit PNG out:
        # ScaleQuantumToChar(q) = (q + 128) / 257 (integer division).
        q = np.clip(np.floor(257.0 * s + 0.5), 0, 65535)
        out[j] = (q + 128) // 257
    return np.clip(out, 0, 255).astype(np.float32)


def brightness(x, rng, severity):
    # MNIST-C: c = [.1, .2, .3, .4, .5][severity - 1]; severity 3 -> c = 0.3.
    #   x = gray2rgb(x/255); x = rgb2hsv(x); x[:, :, 2] = clip(x[:, :, 2] + c, 0, 1);
    #   x = rgb2gray(hsv2rgb(x)); clip(x, 0, 1) * 255
    # For a grey image R = G = B, so rgb2hsv gives h = 0, s = 0 (delta 0), v = x;
    # hsv2rgb of (0, 0, v') is (v, t, p) = (v', v'(1 - (1 - 0) 0), v'(1 - 0)) = (v', v', v');
    # rgb2gray is rgb @ [0.2125, 0.7154, 0.0721] (scikit-image's weights, applied here the
    # same way).  So the whole corruption is clip(x/255 + c, 0, 1), to float rounding.
    # No randomness: rng is unused.  Checked: MNIST-C's brightness() run with
    # scikit-image 0.24.0 gives the same float32 images on all 5000, bit for bit.
    c = [.1, .2, .3, .4, .5][severity - 1]
    v = np.clip(np.asarray(x) / 255. + c, 0, 1)
    rgb = np.stack([v, v, v], axis=-1)
    g = rgb @ np.array([0.2125, 0.7154, 0.0721], dtype=np.float64)
    return (np.clip(g, 0, 1) * 255).astype(np.float32)


def _affine_rotation_about_centre(angle):
    """MNIST-C's rotate matrix: skimage AffineTransform(rotation=angle) is
    [[cos, -sin, 0], [sin, cos, 0]]; MNIST-C then adds the translation
    a3 = 13.5 (1 - a1 - a2), b3 = 13.5 (1 - b1 - b2) so the centre (13.5, 13.5) stays put."""
    a1, a2 = math.cos(angle), -math.sin(angle)
    b1, b2 = math.sin(angle), math.cos(angle)
    a3 = 13.5 * (1 - a1 - a2)
    b3 = 13.5 * (1 - b1 - b2)
    return (a1, a2, a3), (b1, b2, b3)


def _warp_bilinear(img, rowm, colm):
    """skimage.transform.warp(img, inverse_map=M) for a 2-D float image: order 1
    (bilinear), mode 'constant', cval 0 -- the arithmetic of skimage's _warp_fast and
    _shared/interpolation.pxd (bilinear_interpolation + get_pixel2d 'C').  img is
    (N, rows, cols) float64; colm, rowm the affine rows giving the source (col, row) of each
    output pixel: col' = a1 col + a2 row + a3, row' = b1 col + b2 row + b3."""
    n, rows, cols = img.shape
    r_out, c_out = np.meshgrid(np.arange(rows, dtype=np.float64),
                               np.arange(cols, dtype=np.float64), indexing="ij")
    c = colm[0] * c_out + colm[1] * r_out + colm[2]
    r = rowm[0] * c_out + rowm[1] * r_out + rowm[2]
    minr, minc = np.floor(r), np.floor(c)
    maxr, maxc = np.ceil(r), np.ceil(c)
    dr, dc = r - minr, c - minc

    def pixel(rr, cc):
        inside = (rr >= 0) & (rr < rows) & (cc >= 0) & (cc < cols)
        ri = np.where(inside, rr, 0).astype(np.intp)
        ci = np.where(inside, cc, 0).astype(np.intp)
        return np.where(inside[None], img[:, ri, ci], 0.0)

    top = (1 - dc) * pixel(minr, minc) + dc * pixel(minr, maxc)
    bottom = (1 - dc) * pixel(maxr, minc) + dc * pixel(maxr, maxc)
    return (1 - dr) * top + dr * bottom


def rotate(x, rng, severity):
    # MNIST-C: c = [0.2, 0.4, 0.6, 0.8, 1.][severity - 1] radians; severity 4 -> 0.8 rad
    #   (45.8 degrees); the direction is np.random.choice([-1, 1]) per image; the image is
    #   warped with skimage.transform.warp(x/255, inverse_map=AffineTransform(rotation=c,
    #   translation=[a3, b3])) (bilinear, zero outside), clip(x, 0, 1) * 255.
    # skimage's warp also clips its output to the input's value range; bilinear
    # interpolation of values in [0, 1] with a 0 border never leaves [0, max], and MNIST-C
    # clips to [0, 1] afterwards, so that step is left out (a clean image with no 0 pixel
    # would differ at the border only).  Checked: MNIST-C's rotate() run with scikit-image
    # 0.24.0 and the same signs gives the same float32 images on all 5000, bit for bit.
    c = [0.2, 0.4, 0.6, 0.8, 1.][severity - 1]
    signs = rng.choice([-1, 1], size=len(x))
    img = np.asarray(x) / 255.
    out = np.empty(img.shape, dtype=np.float64)
    for sign in (-1, 1):
        pick = signs == sign
        if pick.any():
            colm, rowm = _affine_rotation_about_centre(c * sign)
            out[pick] = _warp_bilinear(img[pick], rowm, colm)
    return (np.clip(out, 0, 1) * 255).astype(np.float32)


def inverse(x, rng, severity):
    # MNIST-C / Fashion-MNIST-C: 255. - x, no severity, no randomness.
    return 255. - np.asarray(x).astype(np.float32)


# (name used verbatim by the Rust code, corruption, MNIST-C severity or None)
SETS = [
    ("shot_noise-1", shot_noise, 1),
    ("motion_blur-2", motion_blur, 2),
    ("brightness-3", brightness, 3),
    ("rotate-4", rotate, 4),
    ("inverse", inverse, None),
]


# ----------------------------------------------------------------------------- IDX files

def idx_bytes(arr):
    """IDX of a uint8 array: magic 0x0000080N (N = ndim), big-endian dims, raw bytes."""
    arr = np.ascontiguousarray(arr, dtype=np.uint8)
    head = struct.pack(">I", 0x0800 | arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape)
    return head + arr.tobytes()


def gzip_bytes(raw):
    """gzip with no file name and mtime 0 (and CPython's fixed OS byte), level 9."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as f:
        f.write(raw)
    return buf.getvalue()


def to_uint8(x):
    """MNIST-C's float32 image -> uint8 as Fashion-MNIST-C stores it: .astype(np.uint8) of
    the float32 values (truncation toward 0; clipped first, which MNIST-C's functions
    already do)."""
    return np.clip(np.asarray(x, dtype=np.float32), 0, 255).astype(np.uint8)


# ----------------------------------------------------------------------------- outputs

README_HEAD = """\
# fashion-c: corrupted copies of the scored half of the Fashion-MNIST test set

Test items 5000..9999 of `../fashion/t10k-*-ubyte.gz` (the half the drift schedules score),
in order, corrupted with MNIST-C's parameters (Mu & Gilmer 2019, arXiv:1906.02337;
google-research/mnist-c `corruptions.py` at bba57e4, https://github.com/google-research/mnist-c):

| set | MNIST-C corruption and parameters |
| --- | --- |
| `shot_noise-1` | shot noise, severity 1: poisson(60 x/255)/60 |
| `motion_blur-2` | motion blur, severity 2: radius 15, sigma 5, angle in [-45, 45] degrees |
| `brightness-3` | brightness, severity 3: HSV value + 0.3 (grey: x/255 + 0.3, clipped) |
| `rotate-4` | rotate, severity 4: 0.8 rad (45.8 degrees) either way, bilinear |
| `inverse` | inverse (kept by Fashion-MNIST-C): 255 - x, no severity |

Each set is `NAME-images-idx3-ubyte.gz` (IDX3, 5000x28x28 uint8) and
`NAME-labels-idx1-ubyte.gz` (IDX1, the 5000 clean labels), gzip'd with mtime 0. Random
draws are seeded (`np.random.default_rng(1906 + index)`), so the files are byte-identical
on every run. `models/train/corrupt.py` says where and how each corruption departs from
MNIST-C's code (numpy re-implementations of the ImageMagick and scikit-image calls;
float32 to uint8 by truncation, as Fashion-MNIST-C stores its images).

Regenerate (never done by CI, which uses these committed files):

    bash models/train/setup.sh
    .deps/train-venv/bin/python models/train/corrupt.py          # writes this folder
    .deps/train-venv/bin/python models/train/corrupt.py --check  # fails if a file differs

"""


def build():
    """{file name: bytes} for every output file, and one summary line per set."""
    x = read_idx(os.path.join(SRC_DIR, "t10k-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(SRC_DIR, "t10k-labels-idx1-ubyte.gz"))
    assert x.shape == (10000, 28, 28) and y.shape == (10000,), (x.shape, y.shape)
    clean, labels = x[FIRST:FIRST + COUNT], y[FIRST:FIRST + COUNT]
    labels_gz = gzip_bytes(idx_bytes(labels))
    files, lines = {}, []
    for index, (name, fn, severity) in enumerate(SETS):
        rng = np.random.default_rng(SEED + index)
        out = to_uint8(fn(clean, rng, severity))
        assert out.shape == clean.shape
        change = np.abs(out.astype(np.int16) - clean.astype(np.int16)).mean()
        lines.append(f"{name:14s} mean |corrupted - clean| = {change:6.2f} / 255 "
                     f"({COUNT} images)")
        files[f"{name}-images-idx3-ubyte.gz"] = gzip_bytes(idx_bytes(out))
        files[f"{name}-labels-idx1-ubyte.gz"] = labels_gz
    readme = README_HEAD + "Mean absolute pixel change against the clean images (0..255):\n\n"
    readme += "".join(f"    {line.split(' (')[0]}\n" for line in lines)
    readme += "\nsha256:\n\n"
    readme += "".join(f"    {hashlib.sha256(b).hexdigest()}  {n}\n"
                      for n, b in sorted(files.items()))
    files["README.md"] = readme.encode()
    return files, lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="regenerate in memory; exit 1 if a committed file differs")
    args = ap.parse_args()
    files, lines = build()
    for line in lines:
        print(line)
    if args.check:
        bad = 0
        for name, data in sorted(files.items()):
            path = os.path.join(OUT_DIR, name)
            if not os.path.exists(path):
                print(f"MISSING {path}")
                bad += 1
                continue
            with open(path, "rb") as f:
                have = f.read()
            if have != data:
                why = ""
                if name.endswith(".gz"):
                    try:
                        same = gzip.decompress(have) == gzip.decompress(data)
                    except (OSError, EOFError) as e:  # a damaged committed file
                        same = None
                        why = f" (not a readable gzip file: {e})"
                    if same is not None:
                        why = (" (same pixels: only the gzip stream differs, e.g. another"
                               " zlib)" if same else " (different pixels)")
                print(f"DIFFERS {path}{why}")
                bad += 1
        extra = sorted(set(os.listdir(OUT_DIR)) - set(files)) if os.path.isdir(OUT_DIR) else []
        for name in extra:
            print(f"UNEXPECTED {os.path.join(OUT_DIR, name)}")
        if bad or extra:
            sys.exit(1)
        print(f"ok: {len(files)} files in {os.path.relpath(OUT_DIR, ROOT)} match")
        return
    os.makedirs(OUT_DIR, exist_ok=True)
    for name, data in sorted(files.items()):
        with open(os.path.join(OUT_DIR, name), "wb") as f:
            f.write(data)
    total = sum(len(b) for b in files.values())
    print(f"wrote {len(files)} files, {total / 1e6:.1f} MB, to {os.path.relpath(OUT_DIR, ROOT)}")


if __name__ == "__main__":
    main()
