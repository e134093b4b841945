"""Sends one image file (JPEG, PNG, WebP or GIF) to Cocktail-rs with the standard Open
Inference Protocol client, PyPI tritonclient: once over HTTP (the image as binary tensor
data, the client's default) and once over gRPC, and prints each answer's label and the
models that voted it.

    python classify.py TASK IMAGE [--http HOST:PORT] [--grpc HOST:PORT]
        [--latency-ms MS] [--accuracy A] [--models NAME,NAME]
"""

import argparse
import json

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient


def classify(client_module, url, task, image, parameters):
    client = client_module.InferenceServerClient(url)
    tensor = client_module.InferInput("image", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([image], dtype=np.object_))
    result = client.infer(task, [tensor], parameters=parameters)
    label = result.as_numpy("label")[0]
    label = label.decode() if isinstance(label, bytes) else str(label)
    response = result.get_response()
    if isinstance(response, dict):  # HTTP: the response's JSON
        models = response["parameters"]["models"]
    else:  # gRPC: a protobuf, whose list parameters are JSON text
        models = json.loads(response.parameters["models"].string_param)
    return f"{label} ({', '.join(models)})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task")
    parser.add_argument("image")
    parser.add_argument("--http", default="127.0.0.1:8080")
    parser.add_argument("--grpc", default="127.0.0.1:8001")
    parser.add_argument("--latency-ms", type=float, default=1000.0)
    parser.add_argument("--accuracy", type=float, default=0.75)
    parser.add_argument("--models", help="pin the ensemble to these models (comma-separated)")
    args = parser.parse_args()
    with open(args.image, "rb") as f:
        image = f.read()
    parameters = {"latency_ms": args.latency_ms, "accuracy": args.accuracy}
    if args.models:
        parameters["models"] = args.models
    for name, module, url in [("http", httpclient, args.http), ("grpc", grpcclient, args.grpc)]:
        print(f"{name}: {classify(module, url, args.task, image, parameters)}")


if __name__ == "__main__":
    main()
