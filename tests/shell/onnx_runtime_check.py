#!/usr/bin/env python3
"""tests/shell/onnx_runtime_check.py — an exported ONNX graph in ONNX Runtime against bareyolo.

Usage: onnx_runtime_check.py STATIC.onnx DYNAMIC.onnx RAW.safetensors DETECTIONS.json CONF IOU
                             NAMES STRIDE ORT_OUTPUTS.npz

RAW is what `bareyolo predict --save-raw` wrote for the images of DETECTIONS.json (input.k,
output.k, letterbox.k). Checks, and exits 1 when one fails:
  1. the batch-1 graph's output on each input.k equals output.k within 1e-4 (absolute for the
     scores in 0..1, relative to max(1, |value|) for the boxes in pixels);
  2. the dynamic-batch graph gives the same on all inputs in one batch; the batch dimension is
     1 in the first graph and the symbol "batch" in the second;
  3. YOLOv5's non_max_suppression (written again below in numpy: candidates by objectness,
     score = objectness x class, best class, class-offset greedy NMS, max_det 300) on the ONNX
     outputs, boxes scaled back to the original images, gives the detections of DETECTIONS.json;
  4. both graphs' metadata, as ONNX Runtime reads it, hold YOLOv5's `stride` (STRIDE) and
     `names`, a dict literal of the '|'-separated NAMES.
The batch-1 graph's inputs and outputs are saved to ORT_OUTPUTS.npz (`inputs`, `outputs`) for
opencv_dnn_check.py.
"""
import ast
import json
import struct
import sys

import numpy as np
import onnxruntime

TOLERANCE = 1e-4


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_bytes,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_bytes])
    metadata = header.pop("__metadata__", {})
    body = data[8 + header_bytes:]
    dtypes = {"F32": np.float32, "F64": np.float64, "I64": np.int64}
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(body[begin:end], dtype=dtypes[entry["dtype"]]).reshape(
            entry["shape"])
    return tensors, metadata


def largest_difference(ours, theirs):
    """The largest |difference| / max(1, |ours|): absolute below 1, relative above."""
    return float(np.max(np.abs(ours - theirs) / np.maximum(1.0, np.abs(ours))))


def non_max_suppression(rows, conf, iou, max_det=300, class_offset=7680.0):
    rows = rows[rows[:, 4] > conf]
    scores = rows[:, 5:] * rows[:, 4:5]
    classes = scores.argmax(1)
    best = scores[np.arange(len(rows)), classes]
    keep = best > conf
    rows, classes, best = rows[keep], classes[keep], best[keep]
    order = np.argsort(-best, kind="stable")
    rows, classes, best = rows[order], classes[order], best[order]
    xy, half = rows[:, :2], rows[:, 2:4] / 2
    boxes = np.concatenate([xy - half, xy + half], 1)
    shifted = boxes + (classes * class_offset)[:, None]
    kept = []
    suppressed = np.zeros(len(rows), bool)
    for i in range(len(rows)):
        if suppressed[i]:
            continue
        kept.append(i)
        if len(kept) == max_det:
            break
        top_left = np.maximum(shifted[i, :2], shifted[:, :2])
        bottom_right = np.minimum(shifted[i, 2:], shifted[:, 2:])
        inter = np.prod(np.clip(bottom_right - top_left, 0, None), 1)
        area = np.prod(shifted[:, 2:] - shifted[:, :2], 1)
        suppressed |= inter / (area[i] + area - inter) > iou
    return boxes[kept], best[kept], classes[kept]


def to_original(boxes, letterbox):
    gain, pad_x, pad_y, width, height = letterbox
    boxes = (boxes - [pad_x, pad_y, pad_x, pad_y]) / gain
    return np.clip(boxes, 0, [width, height, width, height])


def metadata_failures(session, path, names, stride):
    """What is wrong with the stride and names ONNX Runtime reads from the graph's metadata."""
    metadata = session.get_modelmeta().custom_metadata_map
    failures = []
    if metadata.get("stride") != stride:
        failures.append(f"{path}: metadata stride {metadata.get('stride')!r}, expected {stride!r}")
    try:
        written = ast.literal_eval(metadata.get("names", ""))
    except (ValueError, SyntaxError) as error:
        written = f"unreadable ({error})"
    expected = dict(enumerate(names))
    if written != expected:
        failures.append(f"{path}: metadata names {written!r}, expected {expected!r}")
    return failures


def main(static_onnx, dynamic_onnx, raw_file, detections_file, conf, iou, names, stride,
         ort_outputs):
    tensors, metadata = read_safetensors(raw_file)
    images = sorted(int(key.split(".")[1]) for key in metadata if key.startswith("image."))
    assert images, f"{raw_file} holds no images"
    failures = []
    static = onnxruntime.InferenceSession(static_onnx, providers=["CPUExecutionProvider"])
    dynamic = onnxruntime.InferenceSession(dynamic_onnx, providers=["CPUExecutionProvider"])
    for session, path in ((static, static_onnx), (dynamic, dynamic_onnx)):
        failures += metadata_failures(session, path, names, stride)
    # The batch dimension: 1 in the batch-1 graph, the symbol "batch" in the dynamic one (a
    # dimension of -1 is no ONNX shape; ONNX Runtime reads it, other runtimes refuse it).
    for session, path, batch in ((static, static_onnx, 1), (dynamic, dynamic_onnx, "batch")):
        for value in (session.get_inputs()[0], session.get_outputs()[0]):
            if value.shape[0] != batch:
                failures.append(f"{path}: {value.name}'s batch dimension is {value.shape[0]!r}, "
                                f"not {batch!r}")
    print(f"metadata: stride and {len(names)} names read back by ONNX Runtime"
          f"{'' if not failures else ' differ from those expected'}")

    worst = 0.0
    outputs = []
    for k in images:
        (output,) = static.run(None, {"images": tensors[f"input.{k}"]})
        ours = tensors[f"output.{k}"]
        if output.shape != ours.shape:
            failures.append(f"image {k}: ONNX output shape {output.shape}, bareyolo's {ours.shape}")
            continue
        worst = max(worst, largest_difference(ours, output))
        outputs.append(output[0])
    np.savez(ort_outputs, inputs=np.concatenate([tensors[f"input.{k}"] for k in images]),
             outputs=np.stack(outputs))
    print(f"batch-1 graph: {len(images)} images, outputs {outputs[0].shape}, largest difference "
          f"from bareyolo {worst:.2e} (limit {TOLERANCE:g})")
    if worst > TOLERANCE:
        failures.append(f"the batch-1 graph's outputs differ from bareyolo's by {worst:.2e}")

    batch = np.concatenate([tensors[f"input.{k}"] for k in images])
    (batched,) = dynamic.run(None, {"images": batch})
    ours = np.concatenate([tensors[f"output.{k}"] for k in images])
    dynamic_worst = largest_difference(ours, batched) if batched.shape == ours.shape else np.inf
    print(f"dynamic graph: batch {len(images)}, outputs {batched.shape}, largest difference "
          f"{dynamic_worst:.2e}")
    if dynamic_worst > TOLERANCE:
        failures.append(f"the dynamic graph's outputs differ from bareyolo's by {dynamic_worst:.2e}")

    with open(detections_file) as f:
        predicted = json.load(f)
    total = 0
    for k, output in zip(images, outputs):
        boxes, scores, classes = non_max_suppression(output, conf, iou)
        boxes = to_original(boxes, tensors[f"letterbox.{k}"])
        stem = metadata[f"image.{k}"].rsplit("/", 1)[-1].rsplit(".", 1)[0]
        theirs = [d for d in predicted if str(d["image_id"]) == stem]
        total += len(theirs)
        if len(theirs) != len(boxes):
            failures.append(f"{stem}: {len(boxes)} detections from ONNX, {len(theirs)} from predict")
            continue
        for box, score, cls, d in zip(boxes, scores, classes, theirs):
            x, y, w, h = d["bbox"]
            box_difference = np.max(np.abs(box - [x, y, x + w, y + h]))
            if cls != d["category_id"] or abs(score - d["score"]) > TOLERANCE or box_difference > 1e-2:
                failures.append(f"{stem}: ONNX class {cls} score {score:.6f} box {box.round(3)}; "
                                f"predict {d['category_id']} {d['score']:.6f} {[x, y, x + w, y + h]}")
                break
    print(f"after NMS (conf {conf}, IoU {iou}): {total} detections of predict, "
          f"{'the same' if not failures else 'compared'} from the ONNX outputs")
    if total == 0:
        failures.append("predict found no detection: the comparison after NMS would be vacuous")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 10:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:5], float(sys.argv[5]), float(sys.argv[6]), sys.argv[7].split("|"),
                  sys.argv[8], sys.argv[9]))
