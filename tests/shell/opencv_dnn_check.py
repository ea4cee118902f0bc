#!/usr/bin/env python3
"""tests/shell/opencv_dnn_check.py MODEL.onnx ORT_OUTPUTS.npz — the exported graph in OpenCV's DNN.

Loads MODEL.onnx with cv2.dnn.readNetFromONNX (as YOLOv5's detect.py --dnn does), runs it on each
of the `inputs` that onnx_runtime_check.py saved and compares the raw outputs with ONNX
Runtime's `outputs`: the largest |difference| / max(1, |ONNX Runtime's|) must stay within 1e-3.
Run with a Python that has cv2 (OpenCV 4.6's wheel in .venv-onnx, or Debian's python3-opencv);
exits 1 on failure.
"""
import sys

import cv2
import numpy as np

TOLERANCE = 1e-3


def main(model, ort_outputs):
    saved = np.load(ort_outputs)
    net = cv2.dnn.readNetFromONNX(model)
    worst = 0.0
    for image, theirs in zip(saved["inputs"], saved["outputs"]):
        net.setInput(image[None])
        ours = net.forward()[0]
        if ours.shape != theirs.shape:
            print(f"FAIL: OpenCV's output shape {ours.shape}, ONNX Runtime's {theirs.shape}")
            return 1
        worst = max(worst, float(np.max(np.abs(ours - theirs) / np.maximum(1.0, np.abs(theirs)))))
    print(f"OpenCV {cv2.__version__} DNN: {len(saved['inputs'])} images, largest difference from "
          f"ONNX Runtime {worst:.2e} (limit {TOLERANCE:g})")
    if worst > TOLERANCE:
        print(f"FAIL: OpenCV's outputs differ from ONNX Runtime's by {worst:.2e}")
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
