"""What the training scripts export next to their ONNX files for `cocktail zoo`, which
`models/build-zoo.sh` turns into the manifest (no Python writes the manifest):

    models/<task>/models.tsv   one row per model, in the manifest's order (smallest first):
                               the metadata `cocktail zoo add` takes as flags
    models/<task>/labels.txt   the class names, one a line (`cocktail zoo init --labels`)
    models/<task>/config.json  or, for an image task, timm's config format: the class names
                               (`label_names`) and the preprocessing (`pretrained_cfg`),
                               read by `init --labels` and `add --preprocess-from`
"""

import json
import os

COLUMNS = ["name", "params", "train_examples", "epochs", "arch", "description"]


def write_models(task_dir, rows):
    """models.tsv from the training metadata rows (dicts with COLUMNS), in their order."""
    lines = ["\t".join(COLUMNS)]
    for row in rows:
        values = [str(row[c]) for c in COLUMNS]
        assert not any(ch in v for v in values for ch in "\t\n"), f"{row['name']}: tab or newline"
        lines.append("\t".join(values))
    write(os.path.join(task_dir, "models.tsv"), "\n".join(lines) + "\n")


def write_labels(task_dir, labels):
    write(os.path.join(task_dir, "labels.txt"), "".join(f"{label}\n" for label in labels))


def write_image_config(task_dir, labels, input_size, mean, std, interpolation, crop_pct,
                       crop_mode):
    config = {
        "num_classes": len(labels),
        "label_names": labels,
        "pretrained_cfg": {
            "input_size": input_size, "interpolation": interpolation, "crop_pct": crop_pct,
            "crop_mode": crop_mode, "mean": mean, "std": std,
        },
    }
    write(os.path.join(task_dir, "config.json"), json.dumps(config, indent=2) + "\n")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
