"""PyTorch YOLOv5's own training dataloader, timed per CPU-second: bench_data_loader's peer.

LoadImagesAndLabels (augment=True: mosaic, random_perspective, HSV, flips) with
hyp.scratch-low, iterated by torch's DataLoader with the given workers and YOLOv5's collate,
uncached or with its cache_images='ram' (built in the constructor, outside the timing, as
bareyolo's cache is). CPU time is getrusage of this process plus its reaped children (the
workers are joined at the end of each epoch), so processes compare fairly with threads.

Prints one line: YOLOV5 images=<n> cpu_s=<s> wall_s=<s>

Needs torch, cv2 and YOLOv5 in $YOLOV5_DIR: a release tree (v7.0 or later; imports as utils.*)
or the pip package's folder. The constructor gets only the arguments the installed version
takes: `workers` came after v7.0.
"""
import argparse
import inspect
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peer import yolov5_module  # noqa: E402


def cpu_seconds():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def accepted_arguments(function, **arguments):
    """Those of `arguments` that `function` takes by name."""
    parameters = inspect.signature(function).parameters
    return {name: value for name, value in arguments.items() if name in parameters}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", required=True, help="the train split's image folder")
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-batches", type=int, default=0)
    parser.add_argument("--cache", choices=["none", "ram"], default="none")
    args = parser.parse_args()

    import torch
    import yaml
    folder = os.environ["YOLOV5_DIR"]
    LoadImagesAndLabels = yolov5_module(folder, "utils.dataloaders").LoadImagesAndLabels
    with open(os.path.join(folder, "data", "hyps", "hyp.scratch-low.yaml")) as f:
        hyp = yaml.safe_load(f)
    dataset = LoadImagesAndLabels(args.images, args.imgsz, args.batch, augment=True, hyp=hyp,
                                  cache_images="ram" if args.cache == "ram" else False,
                                  stride=32, **accepted_arguments(LoadImagesAndLabels.__init__,
                                                                  workers=args.workers))
    torch.manual_seed(0)
    images = 0
    start_cpu, start_wall = cpu_seconds(), time.perf_counter()
    for _ in range(args.epochs):
        loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True,
                                             num_workers=args.workers,
                                             collate_fn=LoadImagesAndLabels.collate_fn)
        for k, (imgs, _, _, _) in enumerate(loader):
            images += imgs.shape[0]
            if args.max_batches and k + 1 >= args.max_batches:
                break
        del loader  # joins the workers, so their CPU time is counted
    print(f"YOLOV5 images={images} cpu_s={cpu_seconds() - start_cpu:.3f} "
          f"wall_s={time.perf_counter() - start_wall:.3f}")


if __name__ == "__main__":
    main()
