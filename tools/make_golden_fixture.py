#!/usr/bin/env python3
"""Writes the golden fixture: PyTorch YOLOv5's own numbers for one small training problem.

    /opt/yv5/bin/python tools/make_golden_fixture.py [--out tests/fixtures/golden/yolov5-tiny-64.safetensors]

It needs PyTorch, the `yolov5` package and `safetensors` (installed as tools/check_against_yolov5.py
says). tests/unit/golden.cpp reads the file with no Python at test time.

The problem: models/yolov5-tiny.yaml with 2 classes, built and initialised by YOLOv5's Model
(seed 0); 2 random images of 64 px with 6 random labels; hyp.scratch-low's loss gains scaled
as train.py scales them. The reference runs in float64 from the float32 weights and inputs:
the loss and its three components, every parameter's gradient, then 3 plain SGD steps on the
same batch (lr 0.01, momentum 0.9, no Nesterov, no weight decay, no warm-up, no EMA; the
first uses the gradient above), after which every parameter and BatchNorm buffer is saved.
The float32 run of the same steps in PyTorch is measured too: its distance to the float64
reference goes into the metadata, so the test can show how far an exact float32 engine lands.

Records: images (2,3,64,64) and targets (n,6: image, class, cx, cy, w, h) as F32;
weights.<name> (the initial state_dict, F32 / I64); loss (F64: total, box, obj, cls);
grad.<name> and after.<name> (F32, rounded from the float64 reference);
torch_f32_error.{grad,after}.<name> (F64 scalars: PyTorch float32's norm-wise relative
distance to the reference on that tensor).
"""
import argparse
import os
import sys

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from check_against_yolov5 import random_batch, relative  # noqa: E402

CFG = os.path.join(ROOT, "models", "yolov5-tiny.yaml")
NC, IMGSZ, IMAGES, LABELS, SEED = 2, 64, 2, 6, 0
LR, MOMENTUM, STEPS = 0.01, 0.9, 3


def build_model(state, dtype):
    from yolov5.models.yolo import Model
    from yolov5.utils.loss import ComputeLoss

    model = Model(CFG, ch=3, nc=NC)
    model.load_state_dict(state, strict=True)
    model = model.to(dtype).train()
    nl = model.model[-1].nl
    model.hyp = {"box": 0.05 * 3 / nl, "cls": 0.5 * NC / 80 * 3 / nl,
                 "obj": 1.0 * (IMGSZ / 640) ** 2 * 3 / nl, "cls_pw": 1.0, "obj_pw": 1.0,
                 "anchor_t": 4.0, "fl_gamma": 0.0, "label_smoothing": 0.0}
    model.nc = NC
    return model, ComputeLoss(model)


def run(state, images, targets, dtype):
    """The loss and gradients of the first step, and the state after STEPS SGD steps."""
    model, compute_loss = build_model(state, dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    first = None
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss, items = compute_loss(model(images.to(dtype)), targets.to(dtype))
        loss.backward()
        if first is None:
            grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
            first = (torch.cat([loss.detach().reshape(1), items.detach()]), grads)
        optimizer.step()
    after = {n: t.detach().clone() for n, t in model.state_dict().items()}
    return first[0], first[1], after


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "golden",
                                                      "yolov5-tiny-64.safetensors"))
    args = parser.parse_args()

    import yolov5
    from yolov5.models.yolo import Model

    torch.manual_seed(SEED)
    initial = {n: t.detach().clone() for n, t in Model(CFG, ch=3, nc=NC).state_dict().items()}
    images, targets = random_batch(IMAGES, IMGSZ, LABELS, NC, torch.Generator().manual_seed(SEED))

    loss, grads, after = run(initial, images, targets, torch.float64)
    loss32, grads32, after32 = run(initial, images, targets, torch.float32)
    floating = [n for n, t in after.items() if t.is_floating_point()]
    # How far PyTorch's own float32 lands from the reference, per tensor: tensors with tiny
    # values (BatchNorm biases deep in the head, gradients near 1e-6) carry float32 rounding
    # of their larger neighbours, so one relative limit for all would be either loose or unfair.
    grad_error = {n: relative(grads32[n], grads[n]) for n in grads}
    after_error = {n: relative(after32[n], after[n]) for n in floating}
    torch_f32 = {"loss": max(relative(loss32[k:k + 1], loss[k:k + 1]) for k in range(4)),
                 "grad": max(grad_error.values()), "after": max(after_error.values())}

    records = {"images": images, "targets": targets, "loss": loss.double()}
    for name, value in initial.items():
        records["weights." + name] = value.contiguous()
    for name, value in grads.items():
        records["grad." + name] = value.float().contiguous()
    for name, value in after.items():
        records["after." + name] = (value.float() if value.is_floating_point() else value).contiguous()
    for kind, errors in (("grad", grad_error), ("after", after_error)):
        for name, error in errors.items():
            records[f"torch_f32_error.{kind}.{name}"] = torch.tensor(error, dtype=torch.float64)
    metadata = {"cfg": "models/yolov5-tiny.yaml", "nc": str(NC), "imgsz": str(IMGSZ),
                "lr": str(LR), "momentum": str(MOMENTUM), "steps": str(STEPS),
                "made_by": f"yolov5 {yolov5.__version__}, torch {torch.__version__}",
                **{f"torch_f32_{k}": f"{v:.3e}" for k, v in torch_f32.items()}}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    save_file(records, args.out, metadata=metadata)
    print(f"wrote {args.out}: {len(records)} tensors; PyTorch float32 vs float64: "
          + ", ".join(f"{k} {v:.2e}" for k, v in torch_f32.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
