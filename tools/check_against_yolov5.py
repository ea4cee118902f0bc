#!/usr/bin/env python3
"""Checks bareyolo's loss and gradients against PyTorch YOLOv5 on the same weights and batch.

    python3 tools/check_against_yolov5.py [--cfg models/yolov5n.yaml] [--nc 3] [--imgsz 320]
                                          [--batch 2] [--labels 12] [--seed 0]

It needs PyTorch, the `yolov5` package and `safetensors`. One way on Debian 12 (PyTorch from
Debian, the rest from PyPI; the packages that name torch as a dependency go in without their
dependency trees, or pip would fetch a second PyTorch; Debian's own python3, whose
site-packages hold Debian's torch):

    apt-get install python3-torch python3-torchvision python3-venv
    /usr/bin/python3 -m venv --system-site-packages /opt/yv5
    /opt/yv5/bin/pip install --no-deps yolov5==7.0.14 ultralytics==8.0.238 safetensors thop
    /opt/yv5/bin/pip install "opencv-python-headless<4.9" pandas pillow tqdm requests \\
        seaborn matplotlib psutil pyyaml gitpython "numpy<2"
    /opt/yv5/bin/python tools/check_against_yolov5.py

Steps: `bareyolo init` writes random weights; this script writes a random batch; `bareyolo
grads` computes the loss, head outputs and parameter gradients; PyTorch YOLOv5 computes the
same in float64 from the same files (the reference) and in float32. Passes when bareyolo's
loss is within 1e-5 and every gradient within 1e-4 (relative, norm-wise) of the float64
reference. Prints one line per quantity and a final verdict; exits 1 on failure.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def random_batch(images, imgsz, labels, nc, generator):
    pixels = torch.rand(images, 3, imgsz, imgsz, generator=generator)
    rows = torch.zeros(labels, 6)
    rows[:, 0] = torch.randint(0, images, (labels,), generator=generator).float()
    rows[:, 1] = torch.randint(0, nc, (labels,), generator=generator).float()
    rows[:, 2:4] = 0.1 + 0.8 * torch.rand(labels, 2, generator=generator)
    rows[:, 4:6] = 0.02 + 0.4 * torch.rand(labels, 2, generator=generator)
    return pixels.contiguous(), rows.contiguous()


def yolov5_loss_and_grads(cfg, nc, weights, images, targets, dtype):
    from yolov5.models.yolo import Model
    from yolov5.utils.loss import ComputeLoss

    model = Model(cfg, ch=3, nc=nc)
    state = load_file(weights)
    model.load_state_dict(state, strict=True)
    model = model.to(dtype).train()
    nl = model.model[-1].nl
    imgsz = images.shape[-1]
    # hyp.scratch-low's loss entries, scaled as train.py scales them.
    model.hyp = {"box": 0.05 * 3 / nl, "cls": 0.5 * nc / 80 * 3 / nl,
                 "obj": 1.0 * (imgsz / 640) ** 2 * 3 / nl, "cls_pw": 1.0, "obj_pw": 1.0,
                 "anchor_t": 4.0, "fl_gamma": 0.0, "label_smoothing": 0.0}
    model.nc = nc
    compute_loss = ComputeLoss(model)
    predictions = model(images.to(dtype))
    loss, items = compute_loss(predictions, targets.to(dtype))
    loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    return loss.detach().reshape(1), items.detach(), [p.detach() for p in predictions], grads


def relative(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    return (torch.linalg.norm(a - b) / max(torch.linalg.norm(b).item(), 1e-30)).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cfg", default=os.path.join(ROOT, "models", "yolov5n.yaml"))
    parser.add_argument("--nc", type=int, default=3)
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--labels", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bareyolo", default=os.path.join(ROOT, "build", "bareyolo"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        weights, batch, grads_file = (os.path.join(tmp, n) for n in ("w.safetensors", "b.safetensors", "g.safetensors"))
        subprocess.run([args.bareyolo, "init", "--cfg", args.cfg, "--nc", str(args.nc),
                        "--seed", str(args.seed), "--out", weights], check=True)
        images, targets = random_batch(args.batch, args.imgsz, args.labels, args.nc,
                                       torch.Generator().manual_seed(args.seed))
        save_file({"images": images, "targets": targets}, batch)
        subprocess.run([args.bareyolo, "grads", "--cfg", args.cfg, "--weights", weights,
                        "--batch", batch, "--out", grads_file], check=True)
        ours = load_file(grads_file)
        ref = yolov5_loss_and_grads(args.cfg, args.nc, weights, images, targets, torch.float64)
        single = yolov5_loss_and_grads(args.cfg, args.nc, weights, images, targets, torch.float32)

    checks = []  # (what, ours vs float64, torch float32 vs float64, limit)
    checks.append(("loss_total", relative(ours["loss_total"], ref[0]), relative(single[0], ref[0]), 1e-5))
    for k, name in enumerate(["box", "obj", "cls"]):
        checks.append((f"loss {name}", relative(ours["loss"][k:k + 1], ref[1][k:k + 1]),
                       relative(single[1][k:k + 1], ref[1][k:k + 1]), 1e-5))
    for level in range(3):
        checks.append((f"p{level + 3}", relative(ours[f"p{level + 3}"], ref[2][level]),
                       relative(single[2][level], ref[2][level]), 1e-4))
    worst = ("", 0.0, 0.0)
    for name, g in ref[3].items():
        mine = relative(ours["grad." + name], g)
        if mine >= worst[1]:
            worst = (name, mine, relative(single[3][name], g))
        checks.append((f"grad.{name}", mine, relative(single[3][name], g), 1e-4))

    failed = [c for c in checks if not c[1] <= c[3]]
    print(f"{'quantity':48s} {'bareyolo':>10s} {'torch f32':>10s} {'limit':>8s}  (relative to torch float64)")
    for name, mine, theirs, limit in checks[:7] + [(f"worst gradient: grad.{worst[0]}", worst[1], worst[2], 1e-4)]:
        print(f"{name:48s} {mine:10.2e} {theirs:10.2e} {limit:8.0e}")
    print(f"{len(checks) - len(failed)} passed, {len(failed)} failed")
    for name, mine, theirs, limit in failed[:10]:
        print(f"FAILED {name}: {mine:.2e} > {limit:.0e} (torch float32: {theirs:.2e})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
