#!/usr/bin/env python3
"""Writes tests/fixtures/autoanchor/coco128_fit.json: what YOLOv5 v7.0's own AutoAnchor check
prints for coco128's train split, for tests/datasets/autoanchor.cpp.

    /opt/yv5/bin/python tools/make_autoanchor_fixture.py [--out tests/fixtures/autoanchor]

It needs the `yolov5` package (7.0.x) with PyTorch (tools/check_against_yolov5.py says how to
install them). YOLOv5's LoadImagesAndLabels reads the split (image sizes, labels), and its
check_anchors measures anchors against it, as train.py calls it; its log line ("4.45
anchors/target, 0.957 Best Possible Recall (BPR).") is recorded for a few image sizes and
anchor sets. check_anchors multiplies each image's label sizes by a random factor in
[0.9, 1.1); here that draw is replaced by 1, so that the numbers depend on the labels and
the anchors alone and bareyolo's label_sizes(..., random_scale=false) must give the same.
Where the anchors fit poorly check_anchors goes on to k-means, which needs scipy; without it
YOLOv5 logs an error after the line recorded here, which does not matter.
"""
import argparse
import json
import logging
import os
import re
import tempfile
import types

import numpy as np
import torch
from yolov5.utils import autoanchor
from yolov5.utils.dataloaders import LoadImagesAndLabels

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
COCO128 = os.path.join(ROOT, "..", "shared", "datasets", "coco128")
STRIDES = [8.0, 16.0, 32.0]

# (name, image size, anchors per level in pixels)
CASES = [
    ("default anchors at 640", 640,
     [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]]),
    ("default anchors at 320", 320,
     [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]]),
    ("small square anchors at 640", 640,
     [[4, 4, 6, 6, 8, 8], [10, 10, 12, 12, 14, 14], [16, 16, 18, 18, 20, 20]]),
]


def fit_line(dataset, imgsz, anchors):
    """check_anchors' first log line for `anchors` (pixels), its random factor fixed at 1."""
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    autoanchor.LOGGER.addHandler(handler)
    uniform = np.random.uniform
    np.random.uniform = lambda low, high, size: np.ones(size)
    try:
        stride = torch.tensor(STRIDES)
        detect = types.SimpleNamespace(anchors=torch.tensor(anchors, dtype=torch.float32).view(3, 3, 2) /
                                       stride.view(-1, 1, 1),
                                       stride=stride)
        autoanchor.check_anchors(dataset, types.SimpleNamespace(model=[detect]), thr=4.0, imgsz=imgsz)
    finally:
        np.random.uniform = uniform
        autoanchor.LOGGER.removeHandler(handler)
    first = next(line for line in lines if "Best Possible Recall" in line)
    # "\nAutoAnchor: 4.45 anchors/target, 0.957 Best Possible Recall (BPR). <verdict>", the
    # prefix in terminal colours
    text = re.sub(r"\x1b\[[0-9;]*m", "", first).strip().split("AutoAnchor: ")[-1]
    return text[:text.index("(BPR).") + len("(BPR).")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "autoanchor"))
    args = parser.parse_args()
    cases = []
    with tempfile.TemporaryDirectory() as scratch:
        # The split's folders linked from a scratch folder, where YOLOv5 writes its label cache
        # (beside labels/train), leaving the shared dataset untouched.
        for kind in ("images", "labels"):
            os.makedirs(os.path.join(scratch, kind))
            os.symlink(os.path.realpath(os.path.join(COCO128, kind, "train")),
                       os.path.join(scratch, kind, "train"))
        for name, imgsz, anchors in CASES:
            dataset = LoadImagesAndLabels(os.path.join(scratch, "images", "train"), imgsz, augment=True)
            cases.append({"name": name, "imgsz": imgsz, "anchors": anchors,
                          "line": fit_line(dataset, imgsz, anchors)})
            print(name + ": " + cases[-1]["line"])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "coco128_fit.json"), "w") as f:
        f.write('{"made_by": "tools/make_autoanchor_fixture.py", "yolov5": "7.0",\n'
                ' "split": "coco128 images/train", "anchor_t": 4.0,\n "cases": [\n  ' +
                ',\n  '.join(json.dumps(case) for case in cases) + "\n ]}\n")


if __name__ == "__main__":
    main()
