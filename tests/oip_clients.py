"""Conformance checks with the standard Open Inference Protocol client, PyPI `tritonclient`,
against a running Cocktail-rs master (issue 19).

Each check is a name (`http.binary.image`, `grpc.text`, ...) and prints one line, `PASS
name: what held` or `FAIL name: why`; the script exits non-zero when any check failed.
`--check PREFIX` (repeatable) runs the checks whose names start with PREFIX; `--list`
prints every name. tests/tests/oip_clients.rs starts the cluster and runs this with the
venv that scripts/lib.sh's `setup_tritonclient` makes.

The items are real: the first 16 Fashion-MNIST test images and the first 16 sentiment test
sentences of the committed test sets (models/zoo.toml names them), with their true
labels. The ensembles are 80 to 90 % accurate, so a check wants at least 12 of the 16
classes right, and every answer consistent (types, shapes, `label` naming `class`).

The contract checked (the master's side of issue 19):
- inputs `image` BYTES [n] (PNG bytes; base64 strings in JSON), `pixels` FP32 [n,1,28,28]
  (`(p / 255 - mean) / std`, or `p * scale` when `scale` is given, per channel, stated in
  the HTTP model metadata `inputs[].parameters` as the manifest's preprocess block),
  `text` BYTES [n] (UTF-8);
- request parameters `latency_ms` and `accuracy`; outputs `class` INT64 [n], `label` BYTES
  [n], `scores` FP64 [n, classes], binary or JSON as asked, only the ones asked for;
- health and metadata over HTTP and gRPC; a missing `latency_ms` is HTTP 422 / gRPC
  INVALID_ARGUMENT naming the field; with `--api-key` every call carries
  `Authorization: Bearer KEY` and the `*.auth` checks see a call without it refused.
"""

import argparse
import base64
import csv
import gzip
import io
import struct
import sys
import tomllib
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from PIL import Image
from tritonclient.utils import InferenceServerException

ITEMS = 16
MIN_CORRECT = 12
PARAMETERS = {"latency_ms": 1000.0, "accuracy": 0.9}
OUTPUTS = ("class", "label", "scores")


class CheckFailed(Exception):
    """A check's expectation that did not hold."""


def expect(condition, message):
    if not condition:
        raise CheckFailed(message)


# ---------------------------------------------------------------------------------------
# Test items


@dataclass
class Task:
    """A task's labels and its first ITEMS test items with their true classes."""

    name: str
    labels: list
    items: object  # uint8 [ITEMS, 28, 28] images, or a list of sentences
    truth: list


def load_tasks(zoo_path):
    zoo = tomllib.loads(zoo_path.read_text())
    root = zoo_path.parent
    fashion_spec = zoo["tasks"]["fashion"]
    images_path = root / fashion_spec["test_set"]["images"]
    labels_path = root / fashion_spec["test_set"]["labels"]
    with gzip.open(images_path, "rb") as f:
        magic, _count, rows, cols = struct.unpack(">IIII", f.read(16))
        expect(magic == 2051, f"{images_path}: not IDX images (magic {magic})")
        pixels = np.frombuffer(f.read(ITEMS * rows * cols), dtype=np.uint8)
    with gzip.open(labels_path, "rb") as f:
        magic, _ = struct.unpack(">II", f.read(8))
        expect(magic == 2049, f"{labels_path}: not IDX labels (magic {magic})")
        fashion_truth = list(f.read(ITEMS))
    fashion = Task(
        "fashion",
        fashion_spec["labels"],
        pixels.reshape(ITEMS, rows, cols),
        fashion_truth,
    )
    sentiment_spec = zoo["tasks"]["sentiment"]
    with open(root / sentiment_spec["test_set"]["path"], newline="") as f:
        rows_ = list(csv.DictReader(f, delimiter="\t"))[:ITEMS]
    sentiment = Task(
        "sentiment",
        sentiment_spec["labels"],
        [r["text"] for r in rows_],
        [int(r["label"]) for r in rows_],
    )
    # What the FP32 input expects when the metadata does not say (the models' own).
    preprocess = next(m["preprocess"] for m in zoo["models"] if m["task"] == "fashion")
    return fashion, sentiment, preprocess


def png(image):
    out = io.BytesIO()
    Image.fromarray(image).save(out, format="PNG")
    return out.getvalue()


# ---------------------------------------------------------------------------------------
# Checking answers


def check_answer(task, result, wanted=OUTPUTS):
    """`result` is a tritonclient InferResult (HTTP or gRPC); checks shapes, the labels
    against the classes and the classes against the truth; returns a summary."""
    n = len(task.truth)
    for name in OUTPUTS:
        present = result.as_numpy(name) is not None
        expect(
            present == (name in wanted),
            f"output `{name}` {'missing' if name in wanted else 'sent but not asked for'}",
        )
    classes = None
    if "class" in wanted:
        classes = result.as_numpy("class")
        expect(classes.dtype == np.int64, f"`class` is {classes.dtype}, not int64")
        expect(classes.shape == (n,), f"`class` has shape {classes.shape}, not ({n},)")
    if "label" in wanted:
        labels = result.as_numpy("label")
        expect(labels.shape == (n,), f"`label` has shape {labels.shape}, not ({n},)")
        labels = [v.decode() if isinstance(v, bytes) else str(v) for v in labels]
        unknown = [v for v in labels if v not in task.labels]
        expect(not unknown, f"`label` values not of the task: {unknown[:3]}")
        if classes is None:
            classes = np.array([task.labels.index(v) for v in labels])
        else:
            named = [task.labels[c] if 0 <= c < len(task.labels) else None for c in classes]
            expect(named == labels, f"`label` {labels} does not name `class` {list(classes)}")
    if "scores" in wanted:
        scores = result.as_numpy("scores")
        shape = (n, len(task.labels))
        expect(scores.dtype == np.float64, f"`scores` is {scores.dtype}, not float64")
        expect(scores.shape == shape, f"`scores` has shape {scores.shape}, not {shape}")
        expect(np.all(np.isfinite(scores)), "`scores` holds non-finite values")
        if classes is None:
            classes = scores.argmax(axis=1)
    correct = int(sum(int(c) == t for c, t in zip(classes, task.truth)))
    expect(
        correct >= MIN_CORRECT,
        f"{correct} of {n} classes right (want >= {MIN_CORRECT}): "
        f"got {list(map(int, classes))}, truth {task.truth}",
    )
    return f"{correct}/{n} right"


def binary_outputs(result, names, binary):
    """HTTP: each output in `names` came back binary (`binary_data_size`) or as JSON
    `data`, as asked."""
    for name in names:
        output = result.get_output(name)
        is_binary = "binary_data_size" in (output.get("parameters") or {})
        expect(
            is_binary == binary,
            f"output `{name}` came back {'binary' if is_binary else 'as JSON'}, "
            f"asked {'binary' if binary else 'JSON'}: {output}",
        )


# ---------------------------------------------------------------------------------------
# The checks


class Checks:
    def __init__(self, args):
        self.headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else None
        # gRPC metadata keys are lowercase (grpcio refuses others).
        self.grpc_headers = {"authorization": f"Bearer {args.api_key}"} if args.api_key else None
        self.fashion, self.sentiment, self.preprocess = load_tasks(Path(args.zoo))
        host = args.http.removeprefix("http://").rstrip("/")
        self.http = httpclient.InferenceServerClient(host, network_timeout=120.0)
        self.grpc = grpcclient.InferenceServerClient(args.grpc) if args.grpc else None
        self._normalisation = None

    # -- inputs ---------------------------------------------------------------------------

    def normalisation(self):
        """`(scale, mean, std, where from)` of the FP32 input: from the HTTP metadata's
        `pixels` input when it states them (http.metadata checks that it does), else the
        models' own from the zoo, so that the pixels checks test the input alone."""
        if self._normalisation is None:
            stated = {}
            try:
                metadata = self.http.get_model_metadata("fashion", headers=self.headers)
                for tensor in metadata.get("inputs", []):
                    if tensor.get("name") == "pixels":
                        stated = tensor.get("parameters") or {}
            except Exception:  # noqa: BLE001 -- http.metadata reports why
                pass
            if all(isinstance(stated.get(k), list) for k in ("mean", "std")):
                self._normalisation = (stated.get("scale"), stated["mean"][0], stated["std"][0],
                                       "metadata")
            else:
                p = self.preprocess
                self._normalisation = (p.get("scale"), p["mean"][0], p["std"][0], "zoo.toml")
        return self._normalisation

    def pixels(self):
        scale, mean, std, source = self.normalisation()
        items = self.fashion.items.astype(np.float32)
        # torchvision's ToTensor divides by 255; a block with `scale` multiplies instead.
        scaled = items / np.float32(255) if scale is None else items * np.float32(scale)
        tensor = (scaled - np.float32(mean)) / np.float32(std)
        return tensor.astype(np.float32).reshape(ITEMS, 1, 28, 28), source

    def inputs(self, module, kind, binary):
        """The one input tensor of `kind` (`image`, `pixels`, `text`) for `module`."""
        source = None
        if kind == "image":
            pngs = [png(image) for image in self.fashion.items]
            values = pngs if binary else [base64.b64encode(p).decode() for p in pngs]
            data = np.array(values, dtype=np.object_)
            tensor = module.InferInput("image", [ITEMS], "BYTES")
        elif kind == "pixels":
            data, source = self.pixels()
            tensor = module.InferInput("pixels", list(data.shape), "FP32")
        else:
            data = np.array([t.encode() for t in self.sentiment.items], dtype=np.object_)
            tensor = module.InferInput("text", [ITEMS], "BYTES")
        if module is httpclient:
            tensor.set_data_from_numpy(data, binary_data=binary)
        else:
            tensor.set_data_from_numpy(data)
        return [tensor], source

    def task_of(self, kind):
        return self.sentiment if kind == "text" else self.fashion

    # -- HTTP -----------------------------------------------------------------------------

    def http_health(self):
        expect(self.http.is_server_live(headers=self.headers), "is_server_live is False")
        expect(self.http.is_server_ready(headers=self.headers), "is_server_ready is False")
        for task in ("fashion", "sentiment"):
            expect(
                self.http.is_model_ready(task, headers=self.headers),
                f"is_model_ready({task!r}) is False",
            )
        expect(
            not self.http.is_model_ready("no-such-task", headers=self.headers),
            "is_model_ready('no-such-task') is True",
        )
        return "live, ready, fashion and sentiment ready"

    def http_metadata(self):
        server = self.http.get_server_metadata(headers=self.headers)
        expect(server.get("name"), f"server metadata has no name: {server}")
        expect("version" in server, f"server metadata has no version: {server}")
        expect(
            isinstance(server.get("extensions"), list),
            f"server metadata has no extensions list: {server}",
        )
        fashion = self.http.get_model_metadata("fashion", headers=self.headers)
        check_model_metadata(fashion, "fashion", len(self.fashion.labels), image=True)
        pixels = next(t for t in fashion["inputs"] if t["name"] == "pixels")
        stated = pixels.get("parameters") or {}
        for key in ("mean", "std", "input_size"):
            expect(
                isinstance(stated.get(key), list),
                f"`pixels` metadata does not state `{key}` in its parameters: {pixels}",
            )
        expect(all(s > 0 for s in stated["std"]), f"`pixels` std is {stated['std']}")
        sentiment = self.http.get_model_metadata("sentiment", headers=self.headers)
        check_model_metadata(sentiment, "sentiment", len(self.sentiment.labels), image=False)
        return (
            f"server {server['name']} {server.get('version')} extensions "
            f"{server['extensions']}; pixels scale {stated.get('scale', '1/255')} mean "
            f"{stated['mean']} std {stated['std']}"
        )

    def http_infer(self, kind, binary):
        inputs, source = self.inputs(httpclient, kind, binary)
        # tritonclient's default is no `outputs` (all of them, binary); JSON outputs must
        # be asked for one by one.
        outputs = (
            None
            if binary
            else [httpclient.InferRequestedOutput(n, binary_data=False) for n in OUTPUTS]
        )
        task = self.task_of(kind)
        result = self.http.infer(
            task.name, inputs, outputs=outputs, parameters=PARAMETERS, headers=self.headers
        )
        binary_outputs(result, OUTPUTS, binary)
        summary = check_answer(task, result)
        return summary + (f" (normalised with the {source}'s mean/std)" if source else "")

    def http_outputs(self):
        inputs, _ = self.inputs(httpclient, "image", True)
        outputs = [
            httpclient.InferRequestedOutput("class", binary_data=True),
            httpclient.InferRequestedOutput("label", binary_data=False),
        ]
        result = self.http.infer(
            "fashion", inputs, outputs=outputs, parameters=PARAMETERS, headers=self.headers
        )
        binary_outputs(result, ["class"], True)
        binary_outputs(result, ["label"], False)
        return "class (binary) and label (JSON) only: " + check_answer(
            self.fashion, result, wanted=("class", "label")
        )

    def http_missing_latency(self):
        # JSON tensors: this checks the constraint alone, not the binary extension.
        inputs, _ = self.inputs(httpclient, "image", False)
        outputs = [httpclient.InferRequestedOutput(n, binary_data=False) for n in OUTPUTS]
        try:
            self.http.infer(
                "fashion",
                inputs,
                outputs=outputs,
                parameters={"accuracy": 0.9},
                headers=self.headers,
            )
        except InferenceServerException as e:
            expect(e.status() == "422", f"status {e.status()}, not 422: {e.message()}")
            expect("latency_ms" in (e.message() or ""), f"message does not name latency_ms: {e}")
            return f"422: {e.message()}"
        raise CheckFailed("a request without latency_ms was answered")

    def http_auth(self):
        # JSON tensors: this checks the key alone, not the binary extension.
        inputs, _ = self.inputs(httpclient, "image", False)
        outputs = [httpclient.InferRequestedOutput(n, binary_data=False) for n in OUTPUTS]
        for headers, what in (
            (None, "no key"),
            ({"Authorization": "Bearer not-a-key-0123456789abcdef"}, "a wrong key"),
        ):
            try:
                self.http.infer(
                    "fashion", inputs, outputs=outputs, parameters=PARAMETERS, headers=headers
                )
            except InferenceServerException as e:
                expect(e.status() == "401", f"{what}: status {e.status()}, not 401: {e}")
                continue
            raise CheckFailed(f"{what}: the request was answered")
        result = self.http.infer(
            "fashion", inputs, outputs=outputs, parameters=PARAMETERS, headers=self.headers
        )
        return "401 without or with a wrong key; with it: " + check_answer(self.fashion, result)

    # -- gRPC -----------------------------------------------------------------------------

    def grpc_client(self):
        expect(self.grpc is not None, "no --grpc address given")
        return self.grpc

    def grpc_health(self):
        client = self.grpc_client()
        expect(client.is_server_live(headers=self.grpc_headers), "is_server_live is False")
        expect(client.is_server_ready(headers=self.grpc_headers), "is_server_ready is False")
        for task in ("fashion", "sentiment"):
            expect(
                client.is_model_ready(task, headers=self.grpc_headers),
                f"is_model_ready({task!r}) is False",
            )
        return "live, ready, fashion and sentiment ready"

    def grpc_metadata(self):
        client = self.grpc_client()
        server = client.get_server_metadata(headers=self.grpc_headers, as_json=True)
        expect(server.get("name"), f"server metadata has no name: {server}")
        fashion = client.get_model_metadata("fashion", headers=self.grpc_headers, as_json=True)
        check_model_metadata(fashion, "fashion", len(self.fashion.labels), image=True)
        sentiment = client.get_model_metadata("sentiment", headers=self.grpc_headers, as_json=True)
        check_model_metadata(sentiment, "sentiment", len(self.sentiment.labels), image=False)
        return f"server {server['name']} {server.get('version', '')}; fashion and sentiment"

    def grpc_infer(self, kind, parameters=PARAMETERS):
        client = self.grpc_client()
        inputs, source = self.inputs(grpcclient, kind, True)
        task = self.task_of(kind)
        result = client.infer(task.name, inputs, parameters=parameters, headers=self.grpc_headers)
        raw = len(result.get_response().raw_output_contents)
        summary = check_answer(task, result)
        summary += f", outputs {'raw' if raw else 'in contents'}"
        return summary + (f" (normalised with the {source}'s mean/std)" if source else "")

    def grpc_int_parameters(self):
        # tritonclient sends a Python int as int64_param (a float as double_param).
        return "latency_ms as int64_param: " + self.grpc_infer(
            "image", parameters={"latency_ms": 1000, "accuracy": 0.9}
        )

    def grpc_outputs(self):
        client = self.grpc_client()
        inputs, _ = self.inputs(grpcclient, "image", True)
        outputs = [grpcclient.InferRequestedOutput(n) for n in ("class", "label")]
        result = client.infer(
            "fashion", inputs, outputs=outputs, parameters=PARAMETERS, headers=self.grpc_headers
        )
        names = [o.name for o in result.get_response().outputs]
        expect(sorted(names) == ["class", "label"], f"outputs {names}, asked class and label")
        return "class and label only: " + check_answer(
            self.fashion, result, wanted=("class", "label")
        )

    def grpc_missing_latency(self):
        client = self.grpc_client()
        inputs, _ = self.inputs(grpcclient, "image", True)
        try:
            client.infer("fashion", inputs, parameters={"accuracy": 0.9}, headers=self.grpc_headers)
        except InferenceServerException as e:
            expect(
                e.status() == "StatusCode.INVALID_ARGUMENT",
                f"status {e.status()}, not INVALID_ARGUMENT: {e.message()}",
            )
            expect("latency_ms" in (e.message() or ""), f"message does not name latency_ms: {e}")
            return f"INVALID_ARGUMENT: {e.message()}"
        raise CheckFailed("a request without latency_ms was answered")

    def grpc_auth(self):
        client = self.grpc_client()
        inputs, _ = self.inputs(grpcclient, "image", True)
        for headers, what in (
            (None, "no key"),
            ({"authorization": "Bearer not-a-key-0123456789abcdef"}, "a wrong key"),
        ):
            try:
                client.infer("fashion", inputs, parameters=PARAMETERS, headers=headers)
            except InferenceServerException as e:
                expect(
                    e.status() == "StatusCode.UNAUTHENTICATED",
                    f"{what}: status {e.status()}, not UNAUTHENTICATED: {e.message()}",
                )
                continue
            raise CheckFailed(f"{what}: the request was answered")
        result = client.infer("fashion", inputs, parameters=PARAMETERS, headers=self.grpc_headers)
        return "UNAUTHENTICATED without or with a wrong key; with it: " + check_answer(
            self.fashion, result
        )


def check_model_metadata(metadata, task, classes, image):
    """The inputs and outputs the contract names, with distinct input names."""
    expect(metadata.get("name") == task, f"metadata of {task} names {metadata.get('name')}")
    inputs = {}
    for tensor in metadata.get("inputs", []):
        expect(tensor["name"] not in inputs, f"two inputs named `{tensor['name']}`: {metadata}")
        inputs[tensor["name"]] = tensor
    wanted = {"image": "BYTES", "pixels": "FP32"} if image else {"text": "BYTES"}
    for name, datatype in wanted.items():
        expect(name in inputs, f"{task}: no input `{name}` in {list(inputs)}")
        expect(
            inputs[name]["datatype"] == datatype,
            f"{task}: input `{name}` is {inputs[name]['datatype']}, not {datatype}",
        )
    if image:
        shape = [int(d) for d in inputs["pixels"]["shape"]]
        expect(
            len(shape) == 4 and shape[1:] in ([1, 28, 28], [1, -1, -1]),
            f"`pixels` has shape {shape}, not [-1, 1, 28, 28]",
        )
    outputs = {t["name"]: t for t in metadata.get("outputs", [])}
    for name, datatype in (("class", "INT64"), ("label", "BYTES"), ("scores", "FP64")):
        expect(name in outputs, f"{task}: no output `{name}` in {list(outputs)}")
        expect(
            outputs[name]["datatype"] == datatype,
            f"{task}: output `{name}` is {outputs[name]['datatype']}, not {datatype}",
        )
    scores = [int(d) for d in outputs["scores"]["shape"]]
    expect(scores[-1:] == [classes], f"{task}: `scores` has shape {scores}, not [-1, {classes}]")


# Every check, by name, in the order they run.
CHECKS = {
    "http.health": Checks.http_health,
    "http.metadata": Checks.http_metadata,
    **{
        f"http.{'binary' if binary else 'json'}.{kind}": (
            lambda checks, kind=kind, binary=binary: checks.http_infer(kind, binary)
        )
        for binary in (True, False)
        for kind in ("image", "pixels", "text")
    },
    "http.outputs": Checks.http_outputs,
    "http.missing_latency": Checks.http_missing_latency,
    "http.auth": Checks.http_auth,
    "grpc.health": Checks.grpc_health,
    "grpc.metadata": Checks.grpc_metadata,
    **{
        f"grpc.{kind}": lambda checks, kind=kind: checks.grpc_infer(kind)
        for kind in ("image", "pixels", "text")
    },
    "grpc.int_parameters": Checks.grpc_int_parameters,
    "grpc.outputs": Checks.grpc_outputs,
    "grpc.missing_latency": Checks.grpc_missing_latency,
    "grpc.auth": Checks.grpc_auth,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", help="the master's URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--grpc", help="the master's gRPC address, e.g. 127.0.0.1:8001")
    parser.add_argument("--api-key", help="sent as `Authorization: Bearer KEY` on every call")
    parser.add_argument(
        "--zoo",
        default=str(Path(__file__).resolve().parent.parent / "models" / "zoo.toml"),
        help="the model manifest that names the test sets",
    )
    parser.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="PREFIX",
        help="run the checks whose names start with PREFIX (repeatable; default: all)",
    )
    parser.add_argument("--list", action="store_true", help="print every check's name")
    args = parser.parse_args()
    if args.list:
        print("\n".join(CHECKS))
        return 0
    if not args.http:
        parser.error("--http is required")
    selected = [
        name
        for name in CHECKS
        if (not args.check or any(name.startswith(p) for p in args.check))
        # The `*.auth` checks need a master with API keys, and the key.
        and (args.api_key or not name.endswith(".auth"))
    ]
    if not selected:
        print(f"no check matches {args.check}; the checks are {list(CHECKS)}")
        return 2
    checks = Checks(args)
    failed = []
    for name in selected:
        try:
            print(f"PASS {name}: {CHECKS[name](checks)}", flush=True)
        except CheckFailed as e:
            failed.append(name)
            print(f"FAIL {name}: {e}", flush=True)
        except InferenceServerException as e:
            failed.append(name)
            print(f"FAIL {name}: tritonclient raised {e}", flush=True)
        except Exception as e:  # noqa: BLE001 -- a check that crashes has failed, with why
            failed.append(name)
            where = traceback.extract_tb(e.__traceback__)[-1]
            print(
                f"FAIL {name}: {type(e).__name__}: {e} (at {Path(where.filename).name}:"
                f"{where.lineno})",
                flush=True,
            )
    print(f"oip_clients: {len(selected) - len(failed)} of {len(selected)} checks held", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
