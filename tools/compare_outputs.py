#!/usr/bin/env python3
"""Compares what bareyolo writes on two devices (tools/gpu_check.sh: the GPU against the CPU).

Python's standard library only: the GPU machine may have nothing else.

  compare_outputs.py make-batch OUT [--images 2 --imgsz 320 --seed 0]
      a batch file for `bareyolo grads` (images [b,3,H,W] in 0..1, targets [n,6])
  compare_outputs.py same-bits A B
      two safetensors files hold the same tensors to the bit: names, dtypes, shapes, bytes
  compare_outputs.py tensors A B [--rtol 1e-4] [--prefix p]
      every float tensor of two safetensors files: norm-wise relative error
      |a - b| / |b| <= rtol per tensor (and the same names and shapes)
  compare_outputs.py bf16 GPU_BF16 CPU_BF16 CPU_FLOAT [--factor 3] [--prefix grad.]
      a bf16 (--amp) result against the CPU's bf16 definition, measured by the rounding
      noise of that definition: per tensor |gpu - cpu_bf16| <= factor |cpu_bf16 - cpu_float|,
      and over all tensors together |gpu - cpu_bf16| <= |cpu_bf16 - cpu_float|
  compare_outputs.py detections A.json B.json [--box-tol 1.0] [--score-tol 1e-3]
      two COCO results files (val --save-json, predict's detections.json): the same
      detections per image, boxes within box-tol pixels, scores within score-tol
  compare_outputs.py val-metrics A.log B.log [--atol 1e-3]
      the "all" rows of two `bareyolo val` outputs: P, R, mAP50, mAP50-95 within atol

Each prints one line per failure and a last line "ok: ..." or "FAIL: ...", and exits 0 or 1.
"""
import argparse
import array
import json
import math
import random
import struct
import sys


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_bytes,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_bytes])
    header.pop("__metadata__", None)
    body = data[8 + header_bytes :]
    tensors = {}
    for name, record in header.items():
        begin, end = record["data_offsets"]
        tensors[name] = (record["dtype"], record["shape"], body[begin:end])
    return tensors


def floats(dtype, raw):
    code = {"F32": "f", "F64": "d"}.get(dtype)
    return None if code is None else array.array(code, raw)


def write_safetensors(path, tensors):
    """tensors: name -> (shape, list of float32 values), written in name order."""
    header, offset, chunks = {}, 0, []
    for name in sorted(tensors):
        shape, values = tensors[name]
        raw = array.array("f", values).tobytes()
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        chunks.append(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def make_batch(args):
    rng = random.Random(args.seed)
    n, size = args.images, args.imgsz
    images = [rng.random() for _ in range(n * 3 * size * size)]
    targets = []
    for image in range(n):
        for _ in range(3):
            w, h = rng.uniform(0.05, 0.4), rng.uniform(0.05, 0.4)
            targets += [image, rng.randrange(2), rng.uniform(0.3, 0.7), rng.uniform(0.3, 0.7), w, h]
    write_safetensors(args.out, {"images": ([n, 3, size, size], images),
                                 "targets": ([len(targets) // 6, 6], targets)})
    print(f"ok: wrote {args.out}: {n} images of {size} px, {len(targets) // 6} targets")
    return 0


def tensor_verdict(failures, compared, summary):
    """Prints the failures and the last line; nothing compared is a failure too."""
    for line in failures:
        print(line)
    if compared == 0:
        failures.append("no float tensor in common")
    print(f"{'FAIL' if failures else 'ok'}: {compared} tensors, {summary}")
    return 1 if failures else 0


def compare_bits(args):
    a, b = read_safetensors(args.a), read_safetensors(args.b)
    failures = [f"{name}: only in {'A' if name in a else 'B'}" for name in sorted(set(a) ^ set(b))]
    differ = [name for name in sorted(set(a) & set(b)) if a[name] != b[name]]
    failures += [f"{name}: other bits (or dtype, shape)" for name in differ]
    return tensor_verdict(failures, len(set(a) & set(b)), f"{len(differ)} differ in their bits")


def compare_tensors(args):
    a, b = read_safetensors(args.a), read_safetensors(args.b)
    failures, compared, worst = [], 0, (0.0, "")
    for name in sorted(set(a) | set(b)):
        if not name.startswith(args.prefix):
            continue
        if name not in a or name not in b:
            failures.append(f"{name}: only in {'A' if name in a else 'B'}")
            continue
        (dtype_a, shape_a, raw_a), (dtype_b, shape_b, raw_b) = a[name], b[name]
        if shape_a != shape_b:
            failures.append(f"{name}: shape {shape_a} vs {shape_b}")
            continue
        x, y = floats(dtype_a, raw_a), floats(dtype_b, raw_b)
        if x is None or y is None:
            continue
        if not all(map(math.isfinite, x)):
            failures.append(f"{name}: A holds a value that is not finite")
            continue
        diff = math.sqrt(sum((p - q) ** 2 for p, q in zip(x, y)))
        norm = math.sqrt(sum(q * q for q in y))
        error = diff / norm if norm > 0 else diff
        compared += 1
        worst = max(worst, (error, name))
        if not error <= args.rtol:
            failures.append(f"{name}: norm-wise relative error {error:.3g} > {args.rtol:g}")
    return tensor_verdict(failures, compared, f"worst {worst[0]:.3g} ({worst[1]}), "
                          f"{len(failures)} beyond rtol {args.rtol:g}")


def compare_bf16(args):
    gpu, cpu, reference = (read_safetensors(p) for p in (args.gpu_bf16, args.cpu_bf16, args.cpu_float))
    failures, compared, worst, apart_total, noise_total = [], 0, (0.0, ""), 0.0, 0.0
    for name in sorted(reference):
        if not name.startswith(args.prefix):
            continue
        if name not in gpu or name not in cpu:
            failures.append(f"{name}: missing from {'GPU_BF16' if name not in gpu else 'CPU_BF16'}")
            continue
        g, c, r = (floats(t[name][0], t[name][2]) for t in (gpu, cpu, reference))
        if g is None or c is None or r is None:
            continue
        if len(g) != len(r) or len(c) != len(r):
            failures.append(f"{name}: sizes {len(g)}, {len(c)}, {len(r)}")
            continue
        if not all(map(math.isfinite, g)):
            failures.append(f"{name}: GPU_BF16 holds a value that is not finite")
            continue
        apart = sum((p - q) ** 2 for p, q in zip(g, c))
        noise = sum((p - q) ** 2 for p, q in zip(c, r))
        compared += 1
        apart_total += apart
        noise_total += noise
        ratio = math.sqrt(apart / noise) if noise > 0 else (0.0 if apart == 0 else math.inf)
        worst = max(worst, (ratio, name))
        if not ratio <= args.factor:
            failures.append(f"{name}: {ratio:.3g} times the CPU's bf16 rounding noise > {args.factor:g}")
    overall = math.sqrt(apart_total / noise_total) if noise_total > 0 else math.inf
    if compared and not overall <= 1.0:
        failures.append(f"all tensors: {overall:.3g} times the CPU's bf16 rounding noise > 1")
    return tensor_verdict(failures, compared, f"apart {overall:.3g} times the bf16 noise overall, "
                          f"worst {worst[0]:.3g} ({worst[1]}), {len(failures)} failures")


def compare_detections(args):
    def by_image(path):
        grouped = {}
        for d in json.load(open(path)):
            grouped.setdefault(str(d["image_id"]), []).append(d)
        for detections in grouped.values():
            detections.sort(key=lambda d: (-d["score"], d["category_id"]))
        return grouped

    def same(p, q):
        box = max(abs(u - v) for u, v in zip(p["bbox"], q["bbox"]))
        return (p["category_id"] == q["category_id"] and box <= args.box_tol
                and abs(p["score"] - q["score"]) <= args.score_tol)

    a, b = by_image(args.a), by_image(args.b)
    failures, matched, total = [], 0, 0
    for image in sorted(set(a) | set(b)):
        da, db = a.get(image, []), b.get(image, [])
        total += max(len(da), len(db))
        # Each detection of A against an unmatched one of B: scores that tie may come in either
        # order from the two devices.
        unmatched = list(db)
        for p in da:
            q = next((q for q in unmatched if same(p, q)), None)
            if q is None:
                failures.append(f"image {image}: {p} has no equal in B")
            else:
                unmatched.remove(q)
                matched += 1
        failures += [f"image {image}: {q} has no equal in A" for q in unmatched]
    for line in failures[:20]:
        print(line)
    verdict = "FAIL" if failures or total == 0 else "ok"
    print(f"{verdict}: {matched} of {total} detections equal (box {args.box_tol} px, "
          f"score {args.score_tol}) over {len(set(a) | set(b))} images")
    return 1 if verdict == "FAIL" else 0


def compare_val_metrics(args):
    def all_row(path):
        for line in open(path):
            fields = line.split()
            if len(fields) == 7 and fields[0] == "all":
                return [float(v) for v in fields[3:]]
        raise SystemExit(f"FAIL: no 'all' row in {path}")

    a, b = all_row(args.a), all_row(args.b)
    names = ["P", "R", "mAP50", "mAP50-95"]
    failures = [f"{n}: {x} vs {y}" for n, x, y in zip(names, a, b) if abs(x - y) > args.atol]
    for line in failures:
        print(line)
    verdict = "FAIL" if failures else "ok"
    print(f"{verdict}: " + ", ".join(f"{n} {x:.3f}/{y:.3f}" for n, x, y in zip(names, a, b)))
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("make-batch")
    p.add_argument("out")
    p.add_argument("--images", type=int, default=2)
    p.add_argument("--imgsz", type=int, default=320)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=make_batch)
    p = sub.add_parser("same-bits")
    p.add_argument("a")
    p.add_argument("b")
    p.set_defaults(run=compare_bits)
    p = sub.add_parser("tensors")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--prefix", default="")
    p.set_defaults(run=compare_tensors)
    p = sub.add_parser("bf16")
    p.add_argument("gpu_bf16")
    p.add_argument("cpu_bf16")
    p.add_argument("cpu_float")
    p.add_argument("--factor", type=float, default=3.0)
    p.add_argument("--prefix", default="grad.")
    p.set_defaults(run=compare_bf16)
    p = sub.add_parser("detections")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--box-tol", type=float, default=1.0)
    p.add_argument("--score-tol", type=float, default=1e-3)
    p.set_defaults(run=compare_detections)
    p = sub.add_parser("val-metrics")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--atol", type=float, default=1e-3)
    p.set_defaults(run=compare_val_metrics)
    args = parser.parse_args()
    sys.exit(args.run(args))


if __name__ == "__main__":
    main()
