"""What bench/'s PyTorch peers share: a fair BLAS for torch, YOLOv5's own modules, and (for
bench_train's two step peers) the step's arguments and its timing.

torch_train.py and yolov5_train.py (bench_train's peers) and yolov5_loader.py
(bench_data_loader's) import this from their own folder.
"""
import importlib
import os
import statistics
import sys
import time

OPENBLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
REEXEC_MARK = "BAREYOLO_TORCH_TRAIN_BLAS_SET"


def use_openblas_if_installed(threads):
    """Re-runs this script with OpenBLAS first on the library path when it is installed but
    not the system's libblas.so.3 (Debian's torch otherwise calls the reference BLAS for 1x1
    convolutions at small batches; the loader reads the path only at start); returns only when
    no re-run is needed."""
    if os.environ.get(REEXEC_MARK) or not os.path.exists(os.path.join(OPENBLAS_DIR, "libblas.so.3")):
        return
    if "openblas" in os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3"):
        return
    env = dict(os.environ)
    env[REEXEC_MARK] = "1"
    env["LD_LIBRARY_PATH"] = OPENBLAS_DIR + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env.setdefault("OPENBLAS_NUM_THREADS", str(threads))
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable] + sys.orig_argv[1:], env)


def add_step_arguments(parser):
    """The arguments bench_train passes each step peer, with the same defaults."""
    for name, default in (("--imgsz", 320), ("--batch", 16), ("--threads", 2), ("--warmup", 2),
                          ("--steps", 6)):
        parser.add_argument(name, type=int, default=default)


def images_per_second(step, batch, warmup, steps):
    """batch / the median time of step(update), over `steps` updates after `warmup` (updates
    count from 1)."""
    seconds = []
    for update in range(1, warmup + steps + 1):
        start = time.perf_counter()
        step(update)
        if update > warmup:
            seconds.append(time.perf_counter() - start)
    return batch / statistics.median(seconds)


def loaded_blas():
    """The BLAS library this process has mapped (after torch is imported)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "blas" in line.split()[-1]}
    return ", ".join(sorted(paths)) or "none mapped"


def yolov5_module(folder, name):
    """YOLOv5's module `name` ("utils.loss") from `folder`: a checkout (imports as utils.*) or
    the pip package's folder (imports as yolov5.utils.*)."""
    if os.path.exists(os.path.join(folder, "train.py")) and not os.path.exists(
            os.path.join(folder, "__init__.py")):
        if folder not in sys.path:
            sys.path.insert(0, folder)
        return importlib.import_module(name)
    parent = os.path.dirname(os.path.abspath(folder))
    if parent not in sys.path:
        sys.path.insert(0, parent)
    return importlib.import_module("yolov5." + name)
