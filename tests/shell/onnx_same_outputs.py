#!/usr/bin/env python3
"""tests/shell/onnx_same_outputs.py — two exported ONNX graphs give the same outputs.

Usage: onnx_same_outputs.py A.onnx B.onnx INPUTS.npz

Runs both batch-1 graphs in ONNX Runtime on each image of INPUTS.npz's `inputs` (what
onnx_runtime_check.py saved) and exits 1 unless every output of A equals B's exactly: the same
weights exported from two files (a .pt and its conversion) must make the same graph's numbers.
"""
import sys

import numpy as np
import onnxruntime


def main(first_onnx, second_onnx, inputs_npz):
    inputs = np.load(inputs_npz)["inputs"]
    sessions = [onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
                for path in (first_onnx, second_onnx)]
    differing = 0
    for image in inputs:
        first, second = (session.run(None, {"images": image[None]})[0] for session in sessions)
        differing += first.shape != second.shape or not np.array_equal(first, second)
    print(f"{first_onnx} and {second_onnx}: {len(inputs)} images, "
          f"{differing} with different outputs")
    return 1 if differing or len(inputs) == 0 else 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
