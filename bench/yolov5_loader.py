"""PyTorch YOLOv5's own training dataloader, timed per CPU-second: bench_data_loader's peer.

LoadImagesAndLabels (augment=True: mosaic, random_perspective, HSV, flips) with
hyp.scratch-low, iterated by torch's DataLoader with the given workers and YOLOv5's collate,
uncached or with its cache_images='ram' (built in the constructor, outside the timing, as
bareyolo's cache is). CPU time is getrusage of this process plus its reaped children (the
workers are joined at the end of each epoch), so processes compare fairly with threads.
Prints one line: YOLOV5 images=<n> cpu_s=<s> wall_s=<s>

With --stages it says instead where a sample's CPU time goes: --samples samples built on this
thread alone (no workers; torch on one thread, as in a DataLoader worker; OpenCV single-threaded,
as YOLOv5 sets it), so the thread's CPU time is all of it. YOLOv5's calls are timed through
stand-ins put into its dataloaders module's namespace and onto the dataset object, its files
untouched; each stage counts a call's own time, less that of the timed calls inside it:
  decode          load_image less its cv2.resize: cv2.imread and the check for an .npy copy
  resize          cv2.resize (in load_image; the letterbox of a sample without mosaic, too)
  place           load_mosaic less the above and random_perspective: the 1280x1280 canvas, the
                  four tiles' copies, their labels (copy_paste, at probability 0, counts here)
  warp            random_perspective
  hsv             augment_hsv
  flip_letterbox  np.flipud, np.fliplr and letterbox (the flips are views: their copy is made
                  in the batch stage's np.ascontiguousarray)
  batch           np.ascontiguousarray in __getitem__ (the HWC->CHW, BGR->RGB copy) and
                  collate_fn (torch.stack)
and total is the thread's CPU time of all __getitem__ and collate_fn calls. Prints one line of
CPU milliseconds per sample:
  YOLOV5_STAGES samples=<n> decode_ms=.. resize_ms=.. place_ms=.. warp_ms=.. hsv_ms=..
                flip_letterbox_ms=.. batch_ms=.. total_ms=..

Needs torch, cv2 and YOLOv5 in $YOLOV5_DIR: a release tree (v7.0 or later; imports as utils.*)
or the pip package's folder. The constructor gets only the arguments the installed version
takes: `workers` came after v7.0.
"""
import argparse
import collections
import inspect
import os
import random
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peer import yolov5_module  # noqa: E402

STAGES = ("decode", "resize", "place", "warp", "hsv", "flip_letterbox", "batch")


def cpu_seconds():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def accepted_arguments(function, **arguments):
    """Those of `arguments` that `function` takes by name."""
    parameters = inspect.signature(function).parameters
    return {name: value for name, value in arguments.items() if name in parameters}


class StageClock:
    """CPU seconds of this thread per stage; a timed call counts its own time, less that of the
    timed calls inside it, so nested stages add up to the time spent."""

    def __init__(self):
        self.seconds = collections.defaultdict(float)
        self._inner = [0.0]  # per open call: the time of the timed calls inside it

    def wrap(self, stage, function):
        def timed(*args, **kwargs):
            self._inner.append(0.0)
            start = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent = time.thread_time() - start
                self.seconds[stage] += spent - self._inner.pop()
                self._inner[-1] += spent
        return timed


class TimedModule:
    """Stands in for a module (the cv2 or np that YOLOv5's dataloaders module calls): the
    functions named in `stages` ({function: stage}) are timed, the rest passed through."""

    def __init__(self, module, clock, stages):
        self._module = module
        for function, stage in stages.items():
            setattr(self, function, clock.wrap(stage, getattr(module, function)))

    def __getattr__(self, name):
        return getattr(self._module, name)


def time_stages(dataloaders, dataset, clock):
    """Routes the calls that build a sample through `clock` (see the module's docstring)."""
    dataloaders.cv2 = TimedModule(dataloaders.cv2, clock, {"resize": "resize"})
    dataloaders.np = TimedModule(dataloaders.np, clock, {"flipud": "flip_letterbox",
                                                         "fliplr": "flip_letterbox",
                                                         "ascontiguousarray": "batch"})
    dataloaders.letterbox = clock.wrap("flip_letterbox", dataloaders.letterbox)
    dataloaders.random_perspective = clock.wrap("warp", dataloaders.random_perspective)
    dataloaders.augment_hsv = clock.wrap("hsv", dataloaders.augment_hsv)
    dataset.load_image = clock.wrap("decode", dataset.load_image)
    dataset.load_mosaic = clock.wrap("place", dataset.load_mosaic)


def print_stages(dataloaders, dataset, samples, batch):
    """Builds `samples` samples in batches of `batch` on this thread; prints YOLOV5_STAGES."""
    import torch
    torch.set_num_threads(1)
    random.seed(0)
    clock = StageClock()
    time_stages(dataloaders, dataset, clock)
    collate = clock.wrap("batch", dataset.collate_fn)
    order = []
    while len(order) < samples:
        order += random.sample(range(len(dataset)), len(dataset))
    order = order[:samples]
    start = time.thread_time()
    for first in range(0, samples, batch):
        collate([dataset[index] for index in order[first:first + batch]])
    total = time.thread_time() - start
    per_sample_ms = {stage: 1000 * clock.seconds[stage] / samples for stage in STAGES}
    print(f"YOLOV5_STAGES samples={samples} "
          + " ".join(f"{stage}_ms={ms:.3f}" for stage, ms in per_sample_ms.items())
          + f" total_ms={1000 * total / samples:.3f}")


def print_rate(dataset, args):
    """Iterates the dataset with torch's DataLoader and its workers; prints YOLOV5."""
    import torch
    torch.manual_seed(0)
    images = 0
    start_cpu, start_wall = cpu_seconds(), time.perf_counter()
    for _ in range(args.epochs):
        loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True,
                                             num_workers=args.workers,
                                             collate_fn=dataset.collate_fn)
        for k, (imgs, _, _, _) in enumerate(loader):
            images += imgs.shape[0]
            if args.max_batches and k + 1 >= args.max_batches:
                break
        del loader  # joins the workers, so their CPU time is counted
    print(f"YOLOV5 images={images} cpu_s={cpu_seconds() - start_cpu:.3f} "
          f"wall_s={time.perf_counter() - start_wall:.3f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", required=True, help="the train split's image folder")
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-batches", type=int, default=0)
    parser.add_argument("--cache", choices=["none", "ram"], default="none")
    parser.add_argument("--stages", action="store_true",
                        help="print where a sample's CPU time goes instead of the rate")
    parser.add_argument("--samples", type=int, default=64, help="samples timed by --stages")
    args = parser.parse_args()

    import yaml
    folder = os.environ["YOLOV5_DIR"]
    dataloaders = yolov5_module(folder, "utils.dataloaders")
    with open(os.path.join(folder, "data", "hyps", "hyp.scratch-low.yaml")) as f:
        hyp = yaml.safe_load(f)
    LoadImagesAndLabels = dataloaders.LoadImagesAndLabels
    dataset = LoadImagesAndLabels(args.images, args.imgsz, args.batch, augment=True, hyp=hyp,
                                  cache_images="ram" if args.cache == "ram" else False,
                                  stride=32, **accepted_arguments(LoadImagesAndLabels.__init__,
                                                                  workers=args.workers))
    if args.stages:
        print_stages(dataloaders, dataset, args.samples, args.batch)
    else:
        print_rate(dataset, args)


if __name__ == "__main__":
    main()
