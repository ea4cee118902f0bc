#!/usr/bin/env python3
"""Writes the focal-loss fixture: YOLOv5's own FocalLoss on random logits and targets.

    /opt/yv5/bin/python tools/make_focal_fixture.py [--out tests/fixtures/focal/focal_loss.safetensors]

YOLOv5 (utils/loss.py) wraps the objectness and class BCEWithLogitsLoss (with pos_weight) in
FocalLoss(gamma=fl_gamma) when the hyp file's fl_gamma > 0. This evaluates that very class in
float64, element by element (reduction 'none'), with autograd's derivative for each logit, on
logits over the sigmoid's whole useful range and targets at 0, at 1 and between (objectness
targets are CIoU values, smoothed class targets are 0.05 / 0.95). tests/unit/loss.cpp reads the
file with no Python at test time.

Records (F64, one entry per case): logit, target, pos_weight, gamma, loss, grad.
"""
import argparse
import os

import torch
from safetensors.torch import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES_PER_SETTING = 40


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "focal",
                                                      "focal_loss.safetensors"))
    args = parser.parse_args()

    import yolov5
    from yolov5.utils.loss import FocalLoss

    generator = torch.Generator().manual_seed(0)
    columns = {name: [] for name in ("logit", "target", "pos_weight", "gamma", "loss", "grad")}
    for gamma in (0.5, 1.5, 2.0):
        for pos_weight in (1.0, 1.3):
            n = CASES_PER_SETTING
            logit = (torch.rand(n, generator=generator, dtype=torch.float64) * 16 - 8)
            target = torch.rand(n, generator=generator, dtype=torch.float64)
            target[: n // 4] = 0.0
            target[n // 4: n // 2] = 1.0
            target[n // 2: n // 2 + 4] = 0.05
            logit.requires_grad_(True)
            criterion = FocalLoss(
                torch.nn.BCEWithLogitsLoss(
                    reduction="none", pos_weight=torch.tensor([pos_weight], dtype=torch.float64)),
                gamma=gamma)
            loss = criterion(logit, target)
            loss.sum().backward()
            columns["logit"].append(logit.detach())
            columns["target"].append(target)
            columns["pos_weight"].append(torch.full((n,), pos_weight, dtype=torch.float64))
            columns["gamma"].append(torch.full((n,), gamma, dtype=torch.float64))
            columns["loss"].append(loss.detach())
            columns["grad"].append(logit.grad.detach())
    tensors = {name: torch.cat(parts).contiguous() for name, parts in columns.items()}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    save_file(tensors, args.out, metadata={"yolov5": yolov5.__version__,
                                           "torch": torch.__version__})
    print(f"wrote {args.out}: {len(tensors['loss'])} cases")


if __name__ == "__main__":
    main()
