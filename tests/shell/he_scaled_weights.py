#!/usr/bin/env python3
"""he_scaled_weights.py IN.safetensors OUT.safetensors [KEY=VALUE...] — fresh weights that see.

PyTorch's default convolution init (kaiming_uniform with a = sqrt(5): variance 1 / (3 fan_in))
shrinks the activations layer after layer, so a fresh YOLOv5 gives nearly the same output
whatever the image: most candidate boxes tie, and NMS then keeps whichever of a tie its sort
happens to put first. Scaling every convolution weight but Detect's by sqrt(6) gives He's
variance 2 / fan_in, and outputs that depend on the image, so comparisons after NMS compare
detections, not tie-breaking. BatchNorm's four vectors are drawn at random too (seeded), so that
an exporter that folds them into the convolutions is tested on more than the identity. Each
KEY=VALUE sets that metadata entry (names=a|b|c: the class names, one per line in the file, as
bareyolo writes them; cfg=PATH: the model yaml); everything else is copied unchanged.
"""
import json
import struct
import sys

import numpy as np

SCALE = np.float32(np.sqrt(6.0))
# BatchNorm's weight, bias, running mean and running variance: uniform in these ranges.
BATCHNORM_RANGES = {"weight": (0.5, 1.5), "bias": (-0.2, 0.2), "running_mean": (-0.3, 0.3),
                    "running_var": (0.5, 2.0)}


def write_header(header):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def main(source, target, *settings):
    with open(source, "rb") as f:
        data = f.read()
    (header_bytes,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_bytes])
    body = bytearray(data[8 + header_bytes:])
    detect = max(int(name.split(".")[1]) for name in header if name.startswith("model."))
    rng = np.random.default_rng(5)
    scaled = 0
    for name, entry in header.items():
        if name == "__metadata__" or entry["dtype"] != "F32":
            continue
        begin, end = entry["data_offsets"]
        values = np.frombuffer(bytes(body[begin:end]), dtype=np.float32)
        role = name.rsplit(".", 1)[-1]
        if ".bn." in name and role in BATCHNORM_RANGES:
            values = rng.uniform(*BATCHNORM_RANGES[role], values.size).astype(np.float32)
        elif len(entry["shape"]) == 4 and not name.startswith(f"model.{detect}."):
            values = values * SCALE
            scaled += 1
        body[begin:end] = values.tobytes()
    if scaled == 0:
        sys.exit(f"{source}: no convolution weights to scale")
    for setting in settings:
        key, value = setting.split("=", 1)
        header.setdefault("__metadata__", {})[key] = value.replace("|", "\n") if key == "names" else value
    with open(target, "wb") as f:
        f.write(write_header(header) + bytes(body))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
