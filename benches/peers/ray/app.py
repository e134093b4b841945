"""Cocktail-rs's fashion ensemble as a Ray Serve application (issue 19, point 5).

Three zoo models (`cnn_med`, `mlp_med`, `lenet`), one deployment with one replica each,
run by ONNX Runtime on the CPU with one intra-op thread, behind a voting ingress that
takes the same OIP v2 JSON body as Cocktail's master on `POST /v2/models/fashion/infer`:
one input `image`, BYTES, shape [n], base64 PNG or JPEG; `parameters` are ignored. The
ingress decodes and normalises the images once, asks the three models concurrently
through deployment handles, takes the majority (a tie goes to the most accurate model)
and answers OIP JSON with `class` (INT64) and `label` (BYTES), naming the members in
`parameters.models` as Cocktail does.

Everything the models need (files, normalisation, labels, accuracy) is read from the zoo
manifest, `models/zoo.toml`, so the two systems cannot drift apart.

Deploy onto a running Ray instance (`ray start --head ...`) and return once it answers:

    python app.py --port 8000

The application outlives this script: it lives in the Ray instance until `ray stop`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import io
import os
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
from PIL import Image
from starlette.requests import Request
from starlette.responses import JSONResponse

from ray import serve

TASK = "fashion"
MODELS = ("cnn_med", "mlp_med", "lenet")
ROUTE = f"/v2/models/{TASK}/infer"
# As Cocktail's master and workers: larger requests are a client's mistake.
MAX_ITEMS = 64
MAX_IMAGE_SIDE = 4096
# Enough in-flight requests per replica that the client's 32 never queue in a proxy
# (Serve's default is 5); the models are far faster than the hops around them.
MAX_ONGOING = 64
# Logical CPUs per replica: four replicas fit a 2-core Ray instance (Serve's default of
# one CPU each would leave two of them pending).
REPLICA_CPUS = 0.25


def zoo_path() -> Path:
    """`COCKTAIL_ZOO`, else `models/zoo.toml` of the checkout this file is in."""
    given = os.environ.get("COCKTAIL_ZOO")
    if given:
        return Path(given)
    return Path(__file__).resolve().parents[3] / "models" / "zoo.toml"


def load_zoo(path: Path) -> dict:
    """The task's labels and, per model, its file, normalisation and accuracy."""
    with path.open("rb") as f:
        zoo = tomllib.load(f)
    entries = {m["name"]: m for m in zoo["models"]}
    models = {}
    for name in MODELS:
        entry = entries[name]
        if entry["task"] != TASK or entry["preprocess"]["kind"] != "image":
            raise ValueError(f"{name} is not a {TASK} image model")
        models[name] = {
            "file": str(path.parent / entry["file"]),
            "input": entry["inputs"][0]["name"],
            "preprocess": grey_normalisation(name, entry["preprocess"]),
            "accuracy": entry["accuracy"],
        }
    return {"labels": zoo["tasks"][TASK]["labels"], "models": models}


def grey_normalisation(name: str, spec: dict) -> dict:
    """The manifest's preprocessing (timm-style fields, as the worker reads them) as the
    size and `(pixel * scale - mean) / std` this application applies; only the grey,
    squashed, one-channel kind the fashion models use."""
    channels, height, width = spec["input_size"]
    if spec.get("colour") != "grey" or channels != 1 or spec.get("crop_mode", "squash") != "squash":
        raise ValueError(f"{name}: only grey one-channel squashed images are supported: {spec}")
    return {
        "width": width,
        "height": height,
        # torchvision's ToTensor divides by 255 unless the manifest names a scale.
        "scale": spec.get("scale", 1 / 255),
        "mean": spec.get("mean", [0.0])[0],
        "std": spec.get("std", [1.0])[0],
    }


class BadRequest(Exception):
    """A request this application refuses, with a message naming the field."""


def decode(item: object) -> Image.Image:
    """One base64 PNG or JPEG as an 8-bit grey image, refusing oversized ones early."""
    if not isinstance(item, str):
        raise BadRequest("`image` items must be base64 strings")
    try:
        raw = base64.b64decode(item, validate=True)
    except (binascii.Error, ValueError) as e:
        raise BadRequest(f"`image` is not base64: {e}") from e
    try:
        image = Image.open(io.BytesIO(raw))
        if image.format not in ("PNG", "JPEG"):
            raise BadRequest("`image` is not a PNG or JPEG image")
        if max(image.size) > MAX_IMAGE_SIDE:
            raise BadRequest(
                f"`image` of {image.size[0]}x{image.size[1]} pixels is over the limit "
                f"of {MAX_IMAGE_SIDE}x{MAX_IMAGE_SIDE}"
            )
        return image.convert("L")
    except (OSError, Image.DecompressionBombError) as e:
        raise BadRequest(f"`image` cannot be decoded: {e}") from e


def tensor(images: list[Image.Image], preprocess: dict) -> np.ndarray:
    """`(pixel * scale - mean) / std` as float32 `[n, 1, height, width]`, resizing images
    that are not the model's size (bilinear, as Cocktail's worker)."""
    size = (preprocess["width"], preprocess["height"])
    pixels = np.stack(
        [
            np.asarray(
                image if image.size == size else image.resize(size, Image.BILINEAR),
                dtype=np.float32,
            )
            for image in images
        ]
    )
    normalised = (pixels * preprocess["scale"] - preprocess["mean"]) / preprocess["std"]
    return normalised[:, None, :, :].astype(np.float32, copy=False)


def vote(ballots: list[list[int]], by_accuracy: list[int]) -> list[int]:
    """Majority per item over the members' classes (`ballots[member][item]`); among tied
    classes the one the most accurate member chose (`by_accuracy`: members, best
    first)."""
    winners = []
    for item in range(len(ballots[0])):
        counts: dict[int, int] = {}
        for ballot in ballots:
            counts[ballot[item]] = counts.get(ballot[item], 0) + 1
        top = max(counts.values())
        winners.append(
            next(
                ballots[m][item]
                for m in by_accuracy
                if counts[ballots[m][item]] == top
            )
        )
    return winners


@serve.deployment(
    num_replicas=1,
    max_ongoing_requests=MAX_ONGOING,
    ray_actor_options={"num_cpus": REPLICA_CPUS},
)
class Model:
    """One ONNX model on the CPU, one intra-op thread; answers the argmax class per row."""

    def __init__(self, name: str, path: str, input_name: str):
        # Imported here so that only the replicas load ONNX Runtime.
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.name = name
        self.input_name = input_name
        self.session = ort.InferenceSession(
            path, sess_options=options, providers=["CPUExecutionProvider"]
        )

    # `async` so that the 0.03-0.2 ms run happens on the replica's loop rather than
    # paying for a hop to Serve's thread pool.
    async def __call__(self, batch: np.ndarray) -> list[int]:
        (logits,) = self.session.run(None, {self.input_name: batch})
        return logits.argmax(axis=1).tolist()


@serve.deployment(
    num_replicas=1,
    max_ongoing_requests=MAX_ONGOING,
    ray_actor_options={"num_cpus": REPLICA_CPUS},
)
class Ensemble:
    """The voting ingress: OIP v2 JSON in, OIP v2 JSON out."""

    def __init__(self, zoo: dict, *members):
        self.labels = zoo["labels"]
        self.names = list(zoo["models"])
        self.members = list(members)
        accuracy = [zoo["models"][n]["accuracy"] for n in self.names]
        self.by_accuracy = sorted(
            range(len(self.names)), key=lambda m: accuracy[m], reverse=True
        )
        # Preprocessing runs once per request, so the members must agree on it.
        kinds = {tuple(sorted(m["preprocess"].items())) for m in zoo["models"].values()}
        if len(kinds) != 1:
            raise ValueError(f"the members preprocess differently: {kinds}")
        self.preprocess = next(iter(zoo["models"].values()))["preprocess"]

    async def __call__(self, request: Request) -> JSONResponse:
        if request.url.path.rstrip("/") != ROUTE:
            return error(404, "not_found", f"no route {request.url.path}; use {ROUTE}")
        if request.method != "POST":
            return error(405, "method_not_allowed", f"{ROUTE} takes POST")
        try:
            body = await request.json()
        except ValueError as e:
            return error(400, "malformed", f"not valid JSON: {e}")
        try:
            images = self.images(body)
        except BadRequest as e:
            return error(422, "invalid_input", str(e))
        batch = tensor(images, self.preprocess)
        ballots = await asyncio.gather(*(member.remote(batch) for member in self.members))
        classes = vote(list(ballots), self.by_accuracy)
        answer = {
            "model_name": TASK,
            "parameters": {"models": self.names, "scheme": "majority"},
            "outputs": [
                {"name": "class", "datatype": "INT64", "shape": [len(classes)], "data": classes},
                {
                    "name": "label",
                    "datatype": "BYTES",
                    "shape": [len(classes)],
                    "data": [self.labels[c] for c in classes],
                },
            ],
        }
        if isinstance(body.get("id"), str):
            answer["id"] = body["id"]
        return JSONResponse(answer)

    @staticmethod
    def images(body: object) -> list[Image.Image]:
        """The decoded images of a request, checked as Cocktail's master checks them."""
        if not isinstance(body, dict) or not isinstance(body.get("inputs"), list):
            raise BadRequest("`inputs` is required: a list with one input `image`")
        inputs = body["inputs"]
        if len(inputs) != 1 or not isinstance(inputs[0], dict):
            raise BadRequest(f"`inputs` must hold exactly one input; given {len(inputs)}")
        image = inputs[0]
        if image.get("name") != "image" or image.get("datatype") != "BYTES":
            raise BadRequest("the input must be `image`, BYTES, base64 PNG or JPEG")
        data = image.get("data")
        if not isinstance(data, list) or not 1 <= len(data) <= MAX_ITEMS:
            raise BadRequest(f"`image` data must be a list of 1 to {MAX_ITEMS} items")
        if image.get("shape") != [len(data)]:
            raise BadRequest(f"`image` shape must be [{len(data)}]; given {image.get('shape')}")
        return [decode(item) for item in data]


def error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": message, "error_type": kind}, status_code=status)


def build(zoo: dict):
    members = [
        Model.options(name=name).bind(name, model["file"], model["input"])
        for name, model in zoo["models"].items()
    ]
    return Ensemble.bind(zoo, *members)


def wait_until_answering(port: int, timeout_s: float) -> None:
    """Polls the route with an empty body until the ingress itself refuses it (422):
    only then are the proxy (or HAProxy) and the replicas wired up."""
    deadline = time.monotonic() + timeout_s
    url = f"http://127.0.0.1:{port}{ROUTE}"
    while True:
        request = urllib.request.Request(url, data=b"{}", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=5):
                return
        except urllib.error.HTTPError as e:
            if e.code == 422:
                return
            last = f"HTTP {e.code}"
        except OSError as e:
            last = str(e)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not answer within {timeout_s} s: {last}")
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8000, help="Serve's HTTP port")
    parser.add_argument("--address", default="auto", help="the Ray instance")
    parser.add_argument("--timeout-s", type=float, default=180.0)
    args = parser.parse_args()

    import ray

    zoo = load_zoo(zoo_path())
    ray.init(address=args.address, logging_level="WARNING", log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": args.port})
    serve.run(build(zoo), name=TASK, route_prefix="/", blocking=False)
    wait_until_answering(args.port, args.timeout_s)
    print(f"Ray Serve answers on http://127.0.0.1:{args.port}{ROUTE}", file=sys.stderr)


if __name__ == "__main__":
    main()
