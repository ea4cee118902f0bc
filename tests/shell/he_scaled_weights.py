#!/usr/bin/env python3
"""tests/shell/he_scaled_weights.py IN.safetensors OUT.safetensors — fresh weights that see.

PyTorch's default convolution init (kaiming_uniform with a = sqrt(5): variance 1 / (3 fan_in))
shrinks the activations layer after layer, so a fresh YOLOv5 gives nearly the same output
whatever the image: most candidate boxes tie, and NMS then keeps whichever of a tie its sort
happens to put first. Scaling every convolution weight but Detect's by sqrt(6) gives He's
variance 2 / fan_in, and outputs that depend on the image, so comparisons after NMS compare
detections, not tie-breaking. Everything else (shapes, names, metadata) is copied unchanged.
"""
import json
import struct
import sys

import numpy as np

SCALE = np.float32(np.sqrt(6.0))


def main(source, target):
    with open(source, "rb") as f:
        data = f.read()
    (header_bytes,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_bytes])
    body = bytearray(data[8 + header_bytes:])
    detect = max(int(name.split(".")[1]) for name in header if name.startswith("model."))
    scaled = 0
    for name, entry in header.items():
        if name == "__metadata__" or len(entry["shape"]) != 4 or entry["dtype"] != "F32":
            continue
        if name.startswith(f"model.{detect}."):
            continue
        begin, end = entry["data_offsets"]
        weights = np.frombuffer(bytes(body[begin:end]), dtype=np.float32) * SCALE
        body[begin:end] = weights.tobytes()
        scaled += 1
    if scaled == 0:
        sys.exit(f"{source}: no convolution weights to scale")
    with open(target, "wb") as f:
        f.write(data[:8 + header_bytes] + bytes(body))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
