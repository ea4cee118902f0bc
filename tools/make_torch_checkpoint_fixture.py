#!/usr/bin/env python3
"""Writes tests/fixtures/torch/: checkpoints written by PyTorch YOLOv5 v7.0 itself, and hostile ones.

    /opt/yv5/bin/python tools/make_torch_checkpoint_fixture.py [--out tests/fixtures/torch]

It needs PyTorch, torchvision, the `yolov5` package (7.0.x) and `safetensors`, installed as
tools/check_against_yolov5.py says. The C++ tests read the files with no Python at test time.

YOLOv5's own train.py trains models/yolov5-tiny.yaml at width 1/128 (8 channels everywhere,
80 classes) for one epoch on 6 coco128
images at 64 px on the CPU, with --save-period 1 so that it keeps the checkpoint of epoch 0
as written during training (train.py strips last.pt and best.pt when it ends):

  epoch0.pt           unstripped: model and ema (fp16), optimizer state, opt, numpy fitness
  best.pt             as train.py leaves it: stripped (ema, optimizer None), model fp16
  best.state.safetensors  the state_dict YOLOv5 would load from best.pt ('ema' if any, else
                      'model'), values as stored (F16), with metadata nc, names, stride
  epoch0.state.safetensors  the same for epoch0.pt (its 'ema')
  best_torch2.pt      best.pt rewritten as torch 2.x writes a checkpoint (see below)
  hostile/*.pt        best.pt with data.pkl replaced by a pickle that must be refused
and the seeds of fuzz/corpus/torch_checkpoint/ (a one-layer checkpoint, the small hostiles).

torch 2.x (only 1.13 is installed here): torch 2.x adds the records byteorder, .format_version, .storage_alignment and .data/serialization_id,
and every nn.Module's __dict__ gains _forward_hooks_with_kwargs, _forward_hooks_always_called,
_forward_pre_hooks_with_kwargs, _state_dict_pre_hooks and _load_state_dict_post_hooks.
best_torch2.pt is best.pt with all of that done to it (the module attributes added before
torch.save, the records added after) and its folder named "archive", as torch names it when
saving to a file object (to a path it takes the file's stem, as epoch0.pt's "epoch0/" shows).
"""
import argparse
import collections
import glob
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import zipfile

import torch
import yaml
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
COCO128 = os.path.join(ROOT, "..", "shared", "datasets", "coco128")
IMAGES = 6


def make_dataset(folder):
    """The first IMAGES coco128 images with their labels, and a data yaml with coco's 80 names."""
    with open(os.path.join(COCO128, "data.yaml")) as f:
        names = yaml.safe_load(f)["names"]
    for sub in ("images", "labels"):
        os.makedirs(os.path.join(folder, sub, "train"))
    images = sorted(glob.glob(os.path.join(COCO128, "images", "train", "*.jpg")))
    copied = 0
    for image in images:
        stem = os.path.splitext(os.path.basename(image))[0]
        label = os.path.join(COCO128, "labels", "train", stem + ".txt")
        if not os.path.exists(label):
            continue
        shutil.copy(image, os.path.join(folder, "images", "train"))
        shutil.copy(label, os.path.join(folder, "labels", "train"))
        copied += 1
        if copied == IMAGES:
            break
    data = os.path.join(folder, "data.yaml")
    with open(data, "w") as f:
        f.write(f"path: {folder}\ntrain: images/train\nval: images/train\nnc: 80\n")
        yaml.safe_dump({"names": names}, f)
    return data


def train(folder, data):
    """YOLOv5 v7.0's train.py in a child process (it changes global state: seeds, logging)."""
    # yolov5-tiny at width 1/128: every layer 8 channels wide, so the files stay small.
    with open(os.path.join(ROOT, "models", "yolov5-tiny.yaml")) as f:
        model = yaml.safe_load(f)
    model["width_multiple"] = 1 / 128
    cfg = os.path.join(folder, "yolov5-8ch.yaml")
    with open(cfg, "w") as f:
        yaml.safe_dump(model, f)
    # The yolov5 package imports its Roboflow connector and asks the Hugging Face hub for
    # weights='' unconditionally; neither is used here, and neither is installed.
    code = ("import sys, types; stub = types.ModuleType('yolov5.utils.roboflow'); "
            "stub.RoboflowConnector = None; sys.modules['yolov5.utils.roboflow'] = stub; "
            "from yolov5 import train; from yolov5.utils import downloads; "
            "train.attempt_download_from_hub = downloads.attempt_download_from_hub = lambda *a, **k: None; "
            f"train.run(data={data!r}, cfg={cfg!r}, weights='', imgsz=64, epochs=1, "
            f"batch_size=3, workers=0, device='cpu', project={folder!r}, name='run', "
            "exist_ok=True, noplots=True, save_period=1, seed=0)")
    # check_dataset downloads Arial.ttf unless its config folder holds one; no plot is drawn
    # (noplots), so an empty file keeps it offline.
    config = os.path.join(folder, "config")
    os.makedirs(config)
    open(os.path.join(config, "Arial.ttf"), "wb").close()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=folder,
                   env=dict(os.environ, YOLOV5_CONFIG_DIR=config))
    return os.path.join(folder, "run", "weights")


def state_reference(checkpoint_path, out_path):
    """The state_dict YOLOv5 loads from a checkpoint, as stored (fp16 stays fp16)."""
    ckpt = torch.load(checkpoint_path, map_location="cpu")
    model = ckpt["ema"] if ckpt.get("ema") is not None else ckpt["model"]
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    names = model.names if isinstance(model.names, list) else [model.names[i] for i in sorted(model.names)]
    meta = {"nc": str(model.nc), "names": "\n".join(names),
            "stride": ",".join(str(int(s)) for s in model.stride.tolist())}
    save_file(state, out_path, metadata=meta)
    return ckpt


def add_torch2_module_attributes(model):
    for module in model.modules():
        for key in ("_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs",
                    "_state_dict_pre_hooks", "_load_state_dict_post_hooks"):
            if key not in module.__dict__:
                module.__dict__[key] = collections.OrderedDict()
        if "_forward_hooks_always_called" not in module.__dict__:
            module.__dict__["_forward_hooks_always_called"] = collections.OrderedDict()


def rewrite_zip(source, target, folder, extra_records=None, replace=None):
    """`source`'s records under `folder`/, with `replace` (relative name -> bytes) swapped in and
    `extra_records` added; stored, as torch.save stores them."""
    replace = replace or {}
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            relative = info.filename.split("/", 1)[1]
            data = replace.get(relative, zin.read(info.filename))
            if data is not None:
                zout.writestr(f"{folder}/{relative}", data)
        for relative, data in (extra_records or {}).items():
            zout.writestr(f"{folder}/{relative}", data)


def write_torch2(best, out):
    ckpt = torch.load(best, map_location="cpu")
    add_torch2_module_attributes(ckpt["model"])
    staged = out + ".staged"
    torch.save(ckpt, staged)
    rewrite_zip(staged, out, "archive", extra_records={
        "byteorder": b"little", ".format_version": b"1", ".storage_alignment": b"64",
        ".data/serialization_id": b"1234567890123456789012345678901234567890"})
    os.remove(staged)


class SystemCall:
    """Unpickled by Python, this runs a shell command: what bareyolo must refuse to do."""

    def __init__(self, function, argument):
        self.function, self.argument = function, argument

    def __reduce__(self):
        return (self.function, (self.argument,))


class UnknownClass:
    pass


def write_hostile(best, folder):
    os.makedirs(folder, exist_ok=True)
    with zipfile.ZipFile(best) as z:
        prefix = z.namelist()[0].split("/", 1)[0]
        pickled = z.read(f"{prefix}/data.pkl")
        keys = sorted(n.split("/", 1)[1] for n in z.namelist() if "/data/" in n)
        first_storage = z.read(f"{prefix}/{keys[0]}")
    marker = "touch /tmp/bareyolo-pwned"
    hostile = {
        # protocol 2 writes GLOBAL 'posix system'; protocol 4 STACK_GLOBAL 'builtins eval'.
        "os_system": pickle.dumps({"model": SystemCall(os.system, marker)}, protocol=2),
        "eval": pickle.dumps({"model": SystemCall(eval, "__import__('os').system('" + marker + "')")},
                             protocol=4),
        "unknown_global": pickle.dumps({"model": UnknownClass()}, protocol=2),
    }
    for name, data in hostile.items():  # their pickles name no storage: none is written
        with zipfile.ZipFile(os.path.join(folder, name + ".pt"), "w", zipfile.ZIP_STORED) as z:
            z.writestr("archive/data.pkl", data)
            z.writestr("archive/version", b"3\n")
    # The pickle cut in half (its storages kept, so the cut is what is refused).
    rewrite_zip(best, os.path.join(folder, "truncated.pt"), "archive",
                replace={"data.pkl": pickled[:len(pickled) // 2]})
    # The first storage record 8 bytes short of what the pickle says it holds.
    rewrite_zip(best, os.path.join(folder, "short_storage.pt"), "archive",
                replace={keys[0]: first_storage[:-8]})
    # A segmentation model's class, by name (YOLOv5's SegmentationModel pickles as such).
    rewrite_zip(best, os.path.join(folder, "segmentation.pt"), "archive",
                replace={"data.pkl": pickled.replace(b"DetectionModel\n", b"SegmentationModel\n")})


def write_fuzz_seeds(folder, hostile):
    """Seeds for fuzz/torch_checkpoint.cpp, a few KB at most: a whole checkpoint of a one-layer
    DetectionModel (classes registered under YOLOv5's module names, as its pickle names them)
    and the pickle-only hostile files."""
    import types
    os.makedirs(folder, exist_ok=True)
    module = types.ModuleType("models.yolo")
    sys.modules["models.yolo"] = module
    sys.modules.setdefault("models", types.ModuleType("models")).yolo = module

    class DetectionModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.yaml = {"nc": 1, "depth_multiple": 0.33, "width_multiple": 0.25,
                         "anchors": [[10, 13, 16, 30]], "backbone": [[-1, 1, "Conv", [8, 3, 2]]],
                         "head": [[[0], 1, "Detect", ["nc", "anchors"]]]}
            self.model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 1), torch.nn.BatchNorm2d(2))
            self.names = {0: "a"}
            self.stride = torch.tensor([8.0])

    DetectionModel.__module__, DetectionModel.__qualname__ = "models.yolo", "DetectionModel"
    module.DetectionModel = DetectionModel
    model = DetectionModel().half()
    torch.save({"epoch": -1, "model": model, "ema": None, "optimizer": None},
               os.path.join(folder, "tiny.pt"))
    for name in ("os_system", "eval", "unknown_global"):
        shutil.copy(os.path.join(hostile, name + ".pt"), folder)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "torch"))
    parser.add_argument("--fuzz-corpus", default=os.path.join(ROOT, "fuzz", "corpus", "torch_checkpoint"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        data = make_dataset(folder)
        weights = train(folder, data)
        for name in ("epoch0", "best"):
            shutil.copy(os.path.join(weights, name + ".pt"), os.path.join(args.out, name + ".pt"))
    for name in ("epoch0", "best"):
        state_reference(os.path.join(args.out, name + ".pt"),
                        os.path.join(args.out, name + ".state.safetensors"))
    best = os.path.join(args.out, "best.pt")
    write_torch2(best, os.path.join(args.out, "best_torch2.pt"))
    write_hostile(best, os.path.join(args.out, "hostile"))
    write_fuzz_seeds(args.fuzz_corpus, os.path.join(args.out, "hostile"))
    total = sum(os.path.getsize(p) for p in glob.glob(os.path.join(args.out, "**", "*"), recursive=True)
                if os.path.isfile(p))
    print(f"wrote {args.out}: {total} bytes")


if __name__ == "__main__":
    main()
