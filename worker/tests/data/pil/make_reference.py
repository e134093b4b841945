"""Writes the PIL/timm/torchvision reference tensors that `worker/tests/pil_parity.rs`
compares the worker's image preprocessing with.

Run with Python that has Pillow, torchvision and timm (Debian's python3-torch and
python3-torchvision 0.14 with `pip install timm` in a venv made with
--system-site-packages):

    /usr/bin/python3 -m venv --system-site-packages .deps/tvenv
    .deps/tvenv/bin/pip install timm
    .deps/tvenv/bin/python worker/tests/data/pil/make_reference.py

The test images are synthetic (gradients, stripes and seeded noise), so they carry no
licence; the script writes them too. Each case names the manifest block the worker uses
and the reference pipeline, built with the libraries themselves (timm's
`create_transform`, torchvision's `transforms`), never re-implemented here.
"""

import base64
import json
from pathlib import Path

import numpy as np
import PIL
import timm
import torch
import torchvision
from PIL import Image, ImageOps
from timm.data import create_transform
from torchvision import transforms as T

HERE = Path(__file__).resolve().parent
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
# JPEG decoders disagree by a grey level or two (measured here: at most 2 between the
# image crate's zune-jpeg and Pillow's libjpeg-turbo); 3 levels at the smallest std.
JPEG_TOLERANCE = round(3 / 255 / min(IMAGENET_STD), 4)
JPEG_WHY = ("JPEG: zune-jpeg and libjpeg-turbo round the IDCT and chroma upsampling "
            "differently, up to 2 grey levels here; 3 levels allowed")


def synthetic(width, height, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    r = 255 * x / max(width - 1, 1)
    g = 127.5 + 127.5 * np.sin(x / 3.0) * np.cos(y / 5.0)
    b = 255 * ((x // 7 + y // 5) % 2)
    img = np.stack([r, g, b], axis=-1) + rng.normal(0, 18, (height, width, 3))
    return Image.fromarray(np.clip(img, 0, 255).round().astype(np.uint8), "RGB")


def write_images():
    photo = synthetic(157, 103, 7)
    photo.save(HERE / "photo.png")
    photo.save(HERE / "photo.jpg", quality=90)
    # Orientation 6: the stored pixels are rotated; viewers (and exif_transpose) turn
    # them 90 degrees clockwise.
    exif = Image.Exif()
    exif[0x0112] = 6
    photo.transpose(Image.Transpose.ROTATE_90).save(HERE / "photo_exif.jpg", quality=90, exif=exif)
    photo.quantize(64).save(HERE / "photo.gif")
    photo.save(HERE / "photo.webp", lossless=True)
    synthetic(13, 9, 11).save(HERE / "tiny.png")


def open_rgb(name):
    return ImageOps.exif_transpose(Image.open(HERE / name)).convert("RGB")


def timm_eval(size, interpolation, crop_pct, crop_mode, mean, std):
    return create_transform(input_size=size, interpolation=interpolation, mean=mean,
                            std=std, crop_pct=crop_pct, crop_mode=crop_mode,
                            is_training=False)


def block(colour, size, interpolation, crop_pct=None, crop_mode=None, mean=None, std=None,
          resize_size=None, layout="nchw", dtype="float32"):
    b = {"kind": "image", "colour": colour, "input_size": list(size),
         "interpolation": interpolation, "layout": layout, "dtype": dtype}
    for key, value in [("crop_pct", crop_pct), ("crop_mode", crop_mode), ("mean", mean),
                       ("std", std), ("resize_size", resize_size)]:
        if value is not None:
            b[key] = value
    return b


def timm_case(name, image, size, interpolation, crop_pct, crop_mode, mean=IMAGENET_MEAN,
              std=IMAGENET_STD, tolerance=0.0, colour="rgb", why="lossless: bit for bit"):
    pil = open_rgb(image) if colour == "rgb" else open_rgb(image).convert("L")
    tensor = timm_eval(size, interpolation, crop_pct, crop_mode, mean, std)(pil)
    return case(name, image, block(colour, size, interpolation, crop_pct, crop_mode, mean, std),
                tensor.numpy(), "timm create_transform(is_training=False)", tolerance, why)


def case(name, image, manifest, values, pipeline, tolerance, why):
    values = np.ascontiguousarray(values)
    return {"name": name, "image": image, "preprocess": manifest, "pipeline": pipeline,
            "shape": list(values.shape), "dtype": str(values.dtype), "tolerance": tolerance,
            "tolerance_why": why,
            "values": base64.b64encode(values.astype(values.dtype.newbyteorder("<")).tobytes()).decode()}


def main():
    write_images()
    cases = [
        timm_case("timm bicubic centre crop", "photo.png", (3, 24, 24), "bicubic", 0.875, "center"),
        timm_case("timm bilinear squash, non-square", "photo.png", (3, 20, 28), "bilinear", 0.9, "squash"),
        timm_case("timm nearest border", "photo.png", (3, 24, 24), "nearest", 1.0, "border"),
        timm_case("timm bicubic border, portrait", "photo_exif.jpg", (3, 24, 24), "bicubic", 0.95, "border",
                  tolerance=JPEG_TOLERANCE, why=JPEG_WHY),
        timm_case("timm centre crop, non-square target", "photo.png", (3, 18, 30), "bicubic", 0.95, "center"),
        timm_case("timm upscale", "tiny.png", (3, 32, 32), "bicubic", 1.0, "center"),
        timm_case("grey model, colour photo", "photo.png", (1, 16, 16), "bilinear", 1.0, "squash",
                  mean=[0.5], std=[0.25], colour="grey"),
        timm_case("GIF first frame", "photo.gif", (3, 24, 24), "bicubic", 0.875, "center"),
        timm_case("lossless WebP", "photo.webp", (3, 24, 24), "bicubic", 0.875, "center"),
        timm_case("JPEG", "photo.jpg", (3, 24, 24), "bicubic", 0.875, "center", tolerance=JPEG_TOLERANCE,
                  why=JPEG_WHY),
    ]
    tv = T.Compose([T.Resize(28, interpolation=T.InterpolationMode.BILINEAR), T.CenterCrop(24),
                    T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    cases.append(case("torchvision resize_size", "photo.png",
                      block("rgb", (3, 24, 24), "bilinear", mean=IMAGENET_MEAN, std=IMAGENET_STD,
                            resize_size=28, crop_mode="center"),
                      tv(open_rgb("photo.png")).numpy(),
                      "torchvision Resize(28, bilinear) + CenterCrop(24) + ToTensor + Normalize",
                      0.0, "lossless: bit for bit"))
    # timm normalises RGB; the BGR model's channel k is RGB's 2 - k, with its mean and
    # std given in the model's (BGR) order.
    chw = timm_eval((3, 24, 24), "bicubic", 0.875, "center", IMAGENET_MEAN, IMAGENET_STD)(
        open_rgb("photo.png")).numpy()
    cases.append(case("BGR, NHWC", "photo.png",
                      block("bgr", (3, 24, 24), "bicubic", 0.875, "center", IMAGENET_MEAN[::-1],
                            IMAGENET_STD[::-1], layout="nhwc"),
                      np.transpose(chw[::-1], (1, 2, 0)),
                      "timm create_transform, channels reversed, HWC", 0.0,
                      "lossless: bit for bit"))
    crop = T.Compose(timm_eval((3, 24, 24), "bicubic", 0.875, "center", IMAGENET_MEAN, IMAGENET_STD).transforms[:-2])
    cases.append(case("uint8 NCHW", "photo.png",
                      block("rgb", (3, 24, 24), "bicubic", 0.875, "center", dtype="uint8"),
                      np.transpose(np.asarray(crop(open_rgb("photo.png"))), (2, 0, 1)),
                      "timm create_transform without ToTensor and Normalize", 0.0,
                      "lossless: bit for bit"))
    (HERE / "reference.json").write_text(json.dumps({
        "versions": {"pillow": PIL.__version__, "torch": torch.__version__,
                     "torchvision": torchvision.__version__, "timm": timm.__version__},
        "cases": cases}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(cases)} cases")


if __name__ == "__main__":
    main()
