#!/usr/bin/env python3
"""bench_train's YOLOv5 peer: PyTorch YOLOv5's own Model and ComputeLoss on the CPU.

The step bareyolo's bench_train times, in YOLOv5's own code: Model(yolov5n.yaml) in training
mode, ComputeLoss with hyp.scratch-low's gains scaled as train.py scales them (for the levels,
the classes and the image size), backward, clip_grad_norm_(10), SGD with Nesterov momentum
over YOLOv5's three parameter groups, zero_grad and YOLOv5's ModelEMA update. The batch is
made once, in memory: random pixels and three random boxes per image, as bench_train's.
Each rate is the batch over the median step time of --steps steps after --warmup.

Needs torch and YOLOv5 (a checkout or the pip package's folder) in --yolov5-dir. Runs with
--threads threads and, like torch_train.py, OpenBLAS when Debian's is installed.

  python3 bench/yolov5_train.py --yolov5-dir DIR [--cfg yolov5n.yaml] [--imgsz 320]
                                [--batch 16] [--threads 2] [--warmup 2] [--steps 6]
Last line: yolov5_img_s=<x>
"""
import argparse
import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's folder out
from torch_peer import (add_step_arguments, images_per_second, loaded_blas,  # noqa: E402
                        use_openblas_if_installed, yolov5_module)

BOXES_PER_IMAGE = 3


def parse():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--yolov5-dir", required=True)
    parser.add_argument("--cfg", default="yolov5n.yaml")
    add_step_arguments(parser)
    return parser.parse_args()


def main():
    args = parse()
    use_openblas_if_installed(args.threads)
    import torch
    import yaml

    folder = args.yolov5_dir
    Model = yolov5_module(folder, "models.yolo").Model
    ComputeLoss = yolov5_module(folder, "utils.loss").ComputeLoss
    ModelEMA = yolov5_module(folder, "utils.torch_utils").ModelEMA
    with open(os.path.join(folder, "data", "hyps", "hyp.scratch-low.yaml")) as f:
        hyp = yaml.safe_load(f)

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    # YOLOv5 logs its layer table while building the Model: not bench_train's output.
    logging.getLogger("yolov5").setLevel(logging.WARNING)
    model = Model(os.path.join(folder, "models", args.cfg), ch=3).train()
    detect = model.model[-1]
    levels, classes = detect.nl, detect.nc
    hyp["box"] *= 3 / levels  # train.py's scaling of the gains
    hyp["cls"] *= classes / 80 * 3 / levels
    hyp["obj"] *= (args.imgsz / 640) ** 2 * 3 / levels
    model.nc, model.hyp, model.gr = classes, hyp, 1.0
    compute_loss = ComputeLoss(model)

    images = torch.rand(args.batch, 3, args.imgsz, args.imgsz)
    rows = []
    for image in range(args.batch):
        for _ in range(BOXES_PER_IMAGE):
            centre = 0.2 + 0.6 * torch.rand(2)
            side = 0.05 + 0.35 * torch.rand(2)
            rows.append([image, float(torch.randint(classes, (1,))), *centre.tolist(), *side.tolist()])
    targets = torch.tensor(rows)

    # YOLOv5's three groups: BN weights and biases without weight decay.
    norm_weights, decayed, biases = [], [], []
    for module in model.modules():
        if hasattr(module, "bias") and isinstance(module.bias, torch.nn.Parameter):
            biases.append(module.bias)
        if isinstance(module, torch.nn.BatchNorm2d):
            norm_weights.append(module.weight)
        elif hasattr(module, "weight") and isinstance(module.weight, torch.nn.Parameter):
            decayed.append(module.weight)
    optimizer = torch.optim.SGD(norm_weights, lr=0.01, momentum=0.937, nesterov=True)
    optimizer.add_param_group({"params": decayed, "weight_decay": 5e-4})
    optimizer.add_param_group({"params": biases, "weight_decay": 0.0})
    ema = ModelEMA(model)

    def step(_update):
        predictions = model(images)
        loss, _ = compute_loss(predictions, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
        optimizer.step()
        optimizer.zero_grad()
        ema.update(model)

    rate = images_per_second(step, args.batch, args.warmup, args.steps)
    parameters = sum(p.numel() for p in model.parameters())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, BLAS: {loaded_blas()}")
    print(f"PyTorch YOLOv5's Model({args.cfg}) ({parameters} parameters, {classes} classes) and "
          f"ComputeLoss at {args.imgsz}x{args.imgsz}, batch {args.batch}; median of {args.steps} "
          f"steps after {args.warmup}: {rate:.1f} img/s")
    print(f"yolov5_img_s={rate:.2f}")


if __name__ == "__main__":
    main()
