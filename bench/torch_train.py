#!/usr/bin/env python3
# bench/torch_train.py — bench_train's PyTorch peer: the same network (YOLOv5 v6's yolov5n
# layout, written here in plain torch: Conv = conv + BN + SiLU, C3, SPPF, nearest upsample,
# concat, Detect's 1x1 convolutions), the same batch of random data and the same optimizer
# step, timed the same way (median of --steps steps after --warmup).
#
# The step: forward, a simple loss over the head outputs (mean squared error to fixed random
# targets, NOT YOLOv5's loss: bench_train prints the fraction of its own step that YOLOv5's
# loss takes), backward, clip_grad_norm_(10), SGD with Nesterov momentum, zero_grad, EMA.
#
# Fairness: torch.set_num_threads(--threads) (Debian's build starts with 1), and OpenBLAS
# instead of the reference BLAS, which Debian's torch otherwise calls for 1x1 convolutions at
# small batches. When the system's libblas.so.3 is not OpenBLAS but Debian's
# libopenblas0-pthread is installed, the script runs itself again with its folder first on
# LD_LIBRARY_PATH (the loader reads that only at start). It prints which BLAS torch loaded.
#
#   python3 bench/torch_train.py [--imgsz 320] [--batch 16] [--threads 2] [--warmup 2]
#                                [--steps 6] [--width 0.25] [--depth 0.33] [--nc 80]
# Last line: torch_img_s=<x>
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's folder out
from torch_peer import (add_step_arguments, images_per_second, loaded_blas,  # noqa: E402
                        use_openblas_if_installed)

def parse():
    parser = argparse.ArgumentParser(description=__doc__)
    add_step_arguments(parser)
    parser.add_argument("--width", type=float, default=0.25)
    parser.add_argument("--depth", type=float, default=0.33)
    parser.add_argument("--nc", type=int, default=80)
    return parser.parse_args()


def build_model(torch, nn, width, depth, nc):
    def channels(c):  # YOLOv5's rule: scaled by width, rounded up to a multiple of 8
        return int(math.ceil(c * width / 8) * 8)

    def repeats(n):
        return max(round(n * depth), 1) if n > 1 else n

    class Conv(nn.Module):
        def __init__(self, c_in, c_out, k=1, s=1, p=None):
            super().__init__()
            self.conv = nn.Conv2d(c_in, c_out, k, s, k // 2 if p is None else p, bias=False)
            self.bn = nn.BatchNorm2d(c_out, eps=1e-3, momentum=0.03)
            self.act = nn.SiLU()

        def forward(self, x):
            return self.act(self.bn(self.conv(x)))

    class Bottleneck(nn.Module):
        def __init__(self, c, shortcut):
            super().__init__()
            self.cv1, self.cv2 = Conv(c, c, 1), Conv(c, c, 3)
            self.add = shortcut

        def forward(self, x):
            y = self.cv2(self.cv1(x))
            return x + y if self.add else y

    class C3(nn.Module):
        def __init__(self, c_in, c_out, n, shortcut=True):
            super().__init__()
            hidden = c_out // 2
            self.cv1, self.cv2 = Conv(c_in, hidden), Conv(c_in, hidden)
            self.cv3 = Conv(2 * hidden, c_out)
            self.m = nn.Sequential(*(Bottleneck(hidden, shortcut) for _ in range(n)))

        def forward(self, x):
            return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))

    class SPPF(nn.Module):
        def __init__(self, c_in, c_out, k=5):
            super().__init__()
            hidden = c_in // 2
            self.cv1, self.cv2 = Conv(c_in, hidden), Conv(4 * hidden, c_out)
            self.pool = nn.MaxPool2d(k, 1, k // 2)

        def forward(self, x):
            a = self.cv1(x)
            b = self.pool(a)
            c = self.pool(b)
            return self.cv2(torch.cat((a, b, c, self.pool(c)), 1))

    c64, c128, c256, c512, c1024 = (channels(c) for c in (64, 128, 256, 512, 1024))

    class YoloV5(nn.Module):
        def __init__(self):
            super().__init__()
            up = nn.Upsample(scale_factor=2, mode="nearest")
            self.stem = nn.Sequential(Conv(3, c64, 6, 2, 2), Conv(c64, c128, 3, 2), C3(c128, c128, repeats(3)),
                                      Conv(c128, c256, 3, 2), C3(c256, c256, repeats(6)))      # P3/8
            self.down4 = nn.Sequential(Conv(c256, c512, 3, 2), C3(c512, c512, repeats(9)))     # P4/16
            self.down5 = nn.Sequential(Conv(c512, c1024, 3, 2), C3(c1024, c1024, repeats(3)),
                                       SPPF(c1024, c1024), Conv(c1024, c512, 1, 1))             # 10
            self.up4, self.up3 = up, up
            self.neck4 = nn.Sequential(C3(2 * c512, c512, repeats(3), False), Conv(c512, c256, 1, 1))  # 14
            self.out3 = C3(2 * c256, c256, repeats(3), False)                                   # 17
            self.down_p4 = Conv(c256, c256, 3, 2)
            self.out4 = C3(2 * c256, c512, repeats(3), False)                                   # 20
            self.down_p5 = Conv(c512, c512, 3, 2)
            self.out5 = C3(2 * c512, c1024, repeats(3), False)                                  # 23
            outputs = 3 * (nc + 5)
            self.detect = nn.ModuleList(nn.Conv2d(c, outputs, 1) for c in (c256, c512, c1024))

        def forward(self, x):
            p3 = self.stem(x)
            p4 = self.down4(p3)
            x10 = self.down5(p4)
            x14 = self.neck4(torch.cat((self.up4(x10), p4), 1))
            x17 = self.out3(torch.cat((self.up3(x14), p3), 1))
            x20 = self.out4(torch.cat((self.down_p4(x17), x14), 1))
            x23 = self.out5(torch.cat((self.down_p5(x20), x10), 1))
            return [conv(f) for conv, f in zip(self.detect, (x17, x20, x23))]

    return YoloV5()


def main():
    args = parse()
    use_openblas_if_installed(args.threads)
    import torch
    from torch import nn

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = build_model(torch, nn, args.width, args.depth, args.nc).train()
    parameters = sum(p.numel() for p in model.parameters())
    images = torch.rand(args.batch, 3, args.imgsz, args.imgsz)
    with torch.no_grad():
        targets = [torch.rand_like(out) for out in model(images)]

    # YOLOv5's three groups: no weight decay on biases and BN weights.
    decayed = [m.weight for m in model.modules() if isinstance(m, nn.Conv2d)]
    undecayed = [p for p in model.parameters() if all(p is not d for d in decayed)]
    optimizer = torch.optim.SGD([{"params": undecayed, "weight_decay": 0.0},
                                 {"params": decayed, "weight_decay": 5e-4}],
                                lr=0.01, momentum=0.937, nesterov=True)
    ema = [t.detach().clone() for t in model.state_dict().values() if t.dtype.is_floating_point]

    def step(update):
        outputs = model(images)
        loss = sum(((out - target) ** 2).mean() for out, target in zip(outputs, targets))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optimizer.step()
        optimizer.zero_grad()
        with torch.no_grad():  # EMA of every floating-point state entry, YOLOv5's decay ramp
            decay = 0.9999 * (1 - math.exp(-update / 2000))
            floats = [t for t in model.state_dict().values() if t.dtype.is_floating_point]
            for average, value in zip(ema, floats):
                average.mul_(decay).add_(value, alpha=1 - decay)

    rate = images_per_second(step, args.batch, args.warmup, args.steps)
    blas = loaded_blas()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"oneDNN {'on' if torch.backends.mkldnn.is_available() else 'off'}, BLAS: {blas}")
    if "openblas" not in blas:
        print("  not OpenBLAS: install Debian's libopenblas0-pthread for a fair peer "
              "(torch then uses it for 1x1 convolutions)")
    print(f"yolov5n in plain torch ({parameters} parameters, {args.nc} classes) at "
          f"{args.imgsz}x{args.imgsz}, batch {args.batch}, simple MSE loss over the head outputs "
          f"(not YOLOv5's); median of {args.steps} steps after {args.warmup}: {rate:.1f} img/s")
    print(f"torch_img_s={rate:.2f}")


if __name__ == "__main__":
    main()
