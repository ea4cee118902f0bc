#!/usr/bin/env python3
"""bench_gpu_train's PyTorch peer: PyTorch YOLOv5's own training step on one GPU.

    python3 bench/torch_gpu_train.py [--cfg models/yolov5s.yaml] [--nc 80] [--imgsz 640]
        [--batch 64] [--warmup 5] [--steps 20] [--rounds 3] [--amp-dtype float16]
        [--modes eager_nchw,eager_channels_last,eager_nchw_det,eager_channels_last_det,compile]
        [--serve]

Model, loss, optimizer and EMA are YOLOv5's own (Model, ComputeLoss, smart_optimizer, ModelEMA):
from the checkout or the yolov5 package folder that YOLOV5_DIR names when it is set, else from
the `yolov5` package (pip install yolov5). The step is train.py's: forward and loss under
autocast, scaled backward, unscale, clip_grad_norm_(10), scaler step and update, zero_grad, EMA
update, with hyp.scratch-low's values scaled as train.py scales them (weight decay x batch x
accumulate / 64; the loss gains for the levels, classes and image size). One batch, made once
on the GPU: random images in [0, 1), 3 random boxes per image.

Modes, each with its own model, optimizer and EMA, built at its first round:
  eager_nchw               eager, AMP, cudnn.benchmark (fast)
  eager_channels_last      eager, AMP, model and images channels-last, cudnn.benchmark
  eager_nchw_det           eager_nchw with deterministic algorithms, as YOLOv5's train.py asks
                           (init_seeds(deterministic=True): torch.use_deterministic_algorithms,
                           cudnn.deterministic, no cudnn.benchmark)
  eager_channels_last_det  eager_channels_last, deterministic likewise
  compile                  torch.compile(model) (default mode: max-autotune would spend minutes
                           of GPU time tuning), AMP, channels-last, cudnn.benchmark
AMP is float16 with GradScaler by default because that is what YOLOv5's train.py runs
(torch.cuda.amp.autocast); on H100/H200 bfloat16 has the same tensor-core peak, so float16
costs the peer nothing (--amp-dtype bfloat16 to measure it, without GradScaler).
A round sets PyTorch's determinism switches for its mode. CUBLAS_WORKSPACE_CONFIG=:4096:8, which
deterministic cuBLAS needs, is set before torch starts, for every mode (the step's GEMMs are few:
the convolutions are cuDNN's).

A round of a mode: --warmup steps, then --steps timed ones (host clock around each step, the
device synchronised before and after); its figure is batch / the median. One line per round:
  PEER_ROUND mode=<m> img_s=<x> step1_s=<s> peak_alloc_gb=<a> peak_reserved_gb=<r>
  PEER_ROUND mode=<m> absent reason=<why>
step1_s is the mode's first step (cuDNN's search, the compilation), in its first round only.
--serve (how bench_gpu_train runs it): prints PEER_READY, or PEER_ABSENT reason=<why> and exits;
then runs one round of each mode named on a line of stdin until the input ends, returning its
cached GPU memory after each round so that the other engine's turn has the GPU to itself.
Alone: --rounds rounds of each of --modes, then the medians on the last line:
  torch_eager_amp_img_s=<the faster fast eager layout> torch_eager_det_img_s=<the faster
  deterministic one> torch_compile_img_s=<x>
"""
import argparse
import importlib
import logging
import os
import statistics
import sys
import time
import traceback

MODES = ("eager_nchw", "eager_channels_last", "eager_nchw_det", "eager_channels_last_det",
         "compile")
BOXES_PER_IMAGE = 3
NOMINAL_BATCH = 64  # train.py's nbs
HYP = {  # hyp.scratch-low.yaml's entries that the step uses, before train.py's scaling
    "lr0": 0.01, "momentum": 0.937, "weight_decay": 0.0005, "box": 0.05, "cls": 0.5,
    "cls_pw": 1.0, "obj": 1.0, "obj_pw": 1.0, "anchor_t": 4.0, "fl_gamma": 0.0,
    "label_smoothing": 0.0,
}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Read when cuBLAS starts: before torch is imported.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def parse():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cfg", default=os.path.join(ROOT, "models", "yolov5s.yaml"))
    parser.add_argument("--nc", type=int, default=80)
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3, help="alone only; --serve takes commands")
    parser.add_argument("--amp-dtype", choices=("float16", "bfloat16"), default="float16")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--serve", action="store_true")
    args = parser.parse_args()
    args.modes = args.modes.split(",")
    unknown = [m for m in args.modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {','.join(unknown)}; choose from {','.join(MODES)}")
    return args


def say(line):
    print(line, flush=True)  # bench_gpu_train reads this through a pipe: no buffering


def one_line(error):
    """An exception as a short single-line reason, with where it was raised."""
    text = str(error).strip().splitlines()
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300] + where


def import_yolov5():
    """YOLOv5's pieces the step uses, and where they came from; raises ImportError."""
    checkout = os.environ.get("YOLOV5_DIR")
    if checkout and os.path.isfile(os.path.join(checkout, "__init__.py")):
        # The yolov5 package's own folder (pip install yolov5, or tools/stage_gpu_check.sh's
        # copy): its modules import each other as yolov5.*, so its parent goes on the path.
        sys.path.insert(0, os.path.dirname(os.path.abspath(checkout)))
        prefix, origin = "yolov5.", f"the package YOLOV5_DIR={checkout}"
    elif checkout:  # a checkout of ultralytics/yolov5 imports as top-level `models` and `utils`
        sys.path.insert(0, checkout)
        prefix, origin = "", f"the checkout YOLOV5_DIR={checkout}"
    else:
        prefix, origin = "yolov5.", "the yolov5 package"
    try:
        yolo = importlib.import_module(prefix + "models.yolo")
        loss = importlib.import_module(prefix + "utils.loss")
        torch_utils = importlib.import_module(prefix + "utils.torch_utils")
    except Exception as error:  # a missing dependency of YOLOv5 surfaces as any exception here
        hint = ("check that it is a YOLOv5 checkout" if checkout else
                "pip install yolov5, or set YOLOV5_DIR to a checkout of ultralytics/yolov5")
        raise ImportError(f"cannot import YOLOv5 from {origin} ({one_line(error)}); {hint}")
    # Quiet: YOLOv5 logs a layer table per model built; the peer prints its own summary.
    logging.getLogger("yolov5").setLevel(logging.WARNING)
    pieces = argparse.Namespace(Model=yolo.Model, ComputeLoss=loss.ComputeLoss,
                                smart_optimizer=torch_utils.smart_optimizer,
                                ModelEMA=torch_utils.ModelEMA)
    return pieces, origin


def synthetic_batch(torch, batch, imgsz, nc):
    """Random images in [0, 1) and BOXES_PER_IMAGE random labels per image (YOLOv5's target
    rows: image, class, cx, cy, w, h normalised), on the GPU."""
    generator = torch.Generator(device="cuda").manual_seed(0)
    images = torch.rand(batch, 3, imgsz, imgsz, device="cuda", generator=generator)
    rows = batch * BOXES_PER_IMAGE
    targets = torch.empty(rows, 6, device="cuda")
    targets[:, 0] = torch.arange(batch, device="cuda").repeat_interleave(BOXES_PER_IMAGE)
    targets[:, 1] = torch.randint(0, nc, (rows,), device="cuda", generator=generator).float()
    targets[:, 2:4] = 0.2 + 0.6 * torch.rand(rows, 2, device="cuda", generator=generator)
    targets[:, 4:6] = 0.05 + 0.35 * torch.rand(rows, 2, device="cuda", generator=generator)
    return images, targets


def conv_flops_per_image(torch, yolov5, args):
    """Forward FLOPs of one image through the model's convolutions, 2 Cout Cin/groups k^2 Hout
    Wout each (the figure bench_gpu_train computes from its own graph; the batch here is one
    image), and the parameter count."""
    model = yolov5.Model(args.cfg, ch=3, nc=args.nc).cuda()
    flops = []

    def count(conv, inputs, output):
        kernel = conv.kernel_size[0] * conv.kernel_size[1]
        flops.append(2 * output.numel() * conv.in_channels // conv.groups * kernel)

    for module in model.modules():
        if isinstance(module, torch.nn.Conv2d):
            module.register_forward_hook(count)
    with torch.no_grad():
        model(torch.zeros(1, 3, args.imgsz, args.imgsz, device="cuda"))
    return sum(flops), sum(p.numel() for p in model.parameters())


class Mode:
    """One mode's model, YOLOv5's loss, optimizer and EMA, and its step on the shared batch."""

    def __init__(self, torch, yolov5, args, name, images, targets):
        if name == "compile" and not hasattr(torch, "compile"):
            raise RuntimeError(f"torch.compile needs torch 2.0 or later, not {torch.__version__}")
        self.torch, self.first_step_s = torch, None
        self.deterministic = name.endswith("_det")
        model = yolov5.Model(args.cfg, ch=3, nc=args.nc).cuda().train()
        if "nchw" not in name:  # before the optimizer and EMA, so that they match its layout
            model = model.to(memory_format=torch.channels_last)
            images = images.contiguous(memory_format=torch.channels_last)
        levels = model.model[-1].nl
        accumulate = max(round(NOMINAL_BATCH / args.batch), 1)
        hyp = dict(HYP)  # train.py's scaling
        hyp["box"] *= 3 / levels
        hyp["cls"] *= args.nc / 80 * 3 / levels
        hyp["obj"] *= (args.imgsz / 640) ** 2 * 3 / levels
        hyp["weight_decay"] *= args.batch * accumulate / NOMINAL_BATCH
        model.nc, model.hyp = args.nc, hyp
        self.model, self.images, self.targets = model, images, targets
        self.compute_loss = yolov5.ComputeLoss(model)
        self.optimizer = yolov5.smart_optimizer(model, "SGD", hyp["lr0"], hyp["momentum"],
                                                hyp["weight_decay"])
        self.ema = yolov5.ModelEMA(model)
        self.forward = torch.compile(model) if name == "compile" else model
        self.amp_dtype = getattr(torch, args.amp_dtype)
        use_scaler = self.amp_dtype == torch.float16  # bfloat16's range needs no loss scaling
        self.scaler = (torch.amp.GradScaler("cuda", enabled=use_scaler)
                       if hasattr(torch.amp, "GradScaler")
                       else torch.cuda.amp.GradScaler(enabled=use_scaler))

    def step(self):
        torch = self.torch
        with torch.autocast("cuda", dtype=self.amp_dtype):
            predictions = self.forward(self.images)
            loss, _ = self.compute_loss(predictions, self.targets)  # scaled by the batch
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=10.0)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad()
        self.ema.update(self.model)

    def round(self, warmup, steps):
        """The median seconds of the round's timed steps, under the mode's determinism."""
        torch = self.torch
        torch.use_deterministic_algorithms(self.deterministic)
        torch.backends.cudnn.deterministic = self.deterministic
        torch.backends.cudnn.benchmark = not self.deterministic
        seconds = []
        for index in range(warmup + steps):
            torch.cuda.synchronize()
            start = time.perf_counter()
            self.step()
            torch.cuda.synchronize()
            elapsed = time.perf_counter() - start
            if self.first_step_s is None:
                self.first_step_s = elapsed
            if index >= warmup:
                seconds.append(elapsed)
        return statistics.median(seconds)


class Peer:
    """The modes, built on first use; a mode that failed once stays absent with its reason."""

    def __init__(self, torch, yolov5, args):
        self.torch, self.yolov5, self.args = torch, yolov5, args
        self.images, self.targets = synthetic_batch(torch, args.batch, args.imgsz, args.nc)
        self.modes, self.failures = {}, {}

    def round(self, name):
        """Runs one round of `name`; returns its PEER_ROUND line."""
        torch, args = self.torch, self.args
        if name not in MODES:
            return f"PEER_ROUND mode={name} absent reason=unknown mode (modes: {','.join(MODES)})"
        if name in self.failures:
            return f"PEER_ROUND mode={name} absent reason={self.failures[name]}"
        first_round = name not in self.modes
        try:
            if first_round:
                self.modes[name] = Mode(torch, self.yolov5, args, name, self.images, self.targets)
            mode = self.modes[name]
            torch.cuda.reset_peak_memory_stats()
            rate = args.batch / mode.round(args.warmup, args.steps)
            line = (f"PEER_ROUND mode={name} img_s={rate:.2f} "
                    f"step1_s={f'{mode.first_step_s:.3f}' if first_round else '-'} "
                    f"peak_alloc_gb={torch.cuda.max_memory_allocated() / 1e9:.2f} "
                    f"peak_reserved_gb={torch.cuda.max_memory_reserved() / 1e9:.2f}")
        except Exception as error:  # torch.compile's failures come as many exception types
            self.failures[name] = one_line(error)
            self.modes.pop(name, None)
            line = f"PEER_ROUND mode={name} absent reason={self.failures[name]}"
        torch.cuda.empty_cache()
        return line


def start(args):
    """torch with a GPU and YOLOv5, or the reason there is none (the PEER_ABSENT line)."""
    try:
        import torch
    except Exception as error:  # a broken install fails with OSError as often as ImportError
        return None, f"torch does not import ({one_line(error)})"
    if not torch.cuda.is_available():
        return None, (f"torch {torch.__version__} sees no CUDA device (built for CUDA "
                      f"{torch.version.cuda})")
    try:
        yolov5, origin = import_yolov5()
    except ImportError as error:
        return None, str(error)
    torch.manual_seed(0)
    try:
        flops, parameters = conv_flops_per_image(torch, yolov5, args)
    except Exception as error:
        return None, f"YOLOv5's Model cannot be built from {args.cfg} ({one_line(error)})"
    say(f"torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN "
        f"{torch.backends.cudnn.version()}) on {torch.cuda.get_device_name(0)}; YOLOv5 from "
        f"{origin}; AMP {args.amp_dtype}{' + GradScaler' if args.amp_dtype == 'float16' else ''}")
    say(f"{os.path.basename(args.cfg)} in PyTorch YOLOv5: {parameters} parameters, {args.nc} "
        f"classes, {flops / 1e9:.2f} GFLOP per image forward (convolutions) at {args.imgsz}")
    peer = Peer(torch, yolov5, args)
    torch.cuda.empty_cache()  # the probe model's memory, before the other engine's turn
    return peer, None


def main():
    args = parse()
    peer, absent = start(args)
    if args.serve:
        if absent:
            say(f"PEER_ABSENT reason={absent}")
            return
        say("PEER_READY")
        for command in sys.stdin:
            if command.strip():
                say(peer.round(command.strip()))
        return
    if absent:
        say(f"absent: {absent}")
        say("torch_eager_amp_img_s=absent torch_eager_det_img_s=absent torch_compile_img_s=absent")
        return
    rates = {name: [] for name in args.modes}
    for _ in range(args.rounds):
        for name in args.modes:
            line = peer.round(name)
            say(line)
            if " img_s=" in line:
                rates[name].append(float(line.split(" img_s=")[1].split()[0]))

    def median(names):
        values = [statistics.median(rates[n]) for n in names if rates.get(n)]
        return f"{max(values):.2f}" if values else "absent"

    say(f"torch_eager_amp_img_s={median(['eager_nchw', 'eager_channels_last'])} "
        f"torch_eager_det_img_s={median(['eager_nchw_det', 'eager_channels_last_det'])} "
        f"torch_compile_img_s={median(['compile'])}")


if __name__ == "__main__":
    main()
