"""tests/shell/predict_crops_check.py FOLDER NAMES... — the crops `bareyolo predict --save-crop`
wrote into FOLDER/crops match FOLDER/detections.json: one file per detection, in
crops/<class name>/<image stem>.jpg, a class's second crop from one image named <stem>2.jpg and
so on (detect.py takes an image's detections lowest confidence first), each of the size detect.py's
save_one_box cuts: the box's corners rounded (halves to even), its width and height times 1.02
plus 10 pixels about its centre, corners truncated and clipped to the image. The arithmetic is
float32, as torch's, each operation rounded (struct.pack). The source images are FOLDER/../src
(non-numeric stems, so that detections.json's image ids are the stems)."""
import collections
import json
import os
import struct
import sys

sys.dont_write_bytecode = True  # no __pycache__ beside the sources
from jpeg_size import jpeg_size  # noqa: E402


def f32(value):
    return struct.unpack("f", struct.pack("f", value))[0]


def crop_size(box, width, height):
    x, y, w, h = box
    x1, y1, x2, y2 = (float(round(v)) for v in (x, y, f32(x + w), f32(y + h)))
    cx, cy = f32((x1 + x2) / 2), f32((y1 + y2) / 2)
    gw, gh = f32(f32(f32(x2 - x1) * f32(1.02)) + 10), f32(f32(f32(y2 - y1) * f32(1.02)) + 10)
    clip = lambda v, limit: min(max(int(v), 0), limit)  # int() truncates toward zero
    left, right = clip(f32(cx - gw / 2), width), clip(f32(cx + gw / 2), width)
    top, bottom = clip(f32(cy - gh / 2), height), clip(f32(cy + gh / 2), height)
    return right - left, bottom - top


folder, names = sys.argv[1], sys.argv[2:]
detections = collections.defaultdict(list)
for d in json.load(open(os.path.join(folder, "detections.json"))):
    detections[str(d["image_id"])].append(d)
expected = {}
for stem, found in detections.items():
    width, height = jpeg_size(os.path.join(folder, "..", "src", stem + ".jpg"))
    taken = collections.Counter()
    for d in reversed(found):
        name = names[d["category_id"]]
        taken[name] += 1
        number = "" if taken[name] == 1 else str(taken[name])
        expected[f"{name}/{stem}{number}.jpg"] = crop_size(d["bbox"], width, height)
crops = os.path.join(folder, "crops")
written = {os.path.relpath(os.path.join(root, file), crops): jpeg_size(os.path.join(root, file))
           for root, _, files in os.walk(crops) for file in files}
if written != expected:
    missing = sorted(set(expected) - set(written))
    extra = sorted(set(written) - set(expected))
    wrong = sorted(f"{k}: {written[k]} != {expected[k]}" for k in set(written) & set(expected)
                   if written[k] != expected[k])
    sys.exit(f"FAIL: crops missing {missing[:5]}, unexpected {extra[:5]}, wrong size {wrong[:5]}")
numbered = sum(1 for k in written if not k.endswith(tuple(f"/{s}.jpg" for s in detections)))
if numbered == 0:
    sys.exit("FAIL: no image had two crops of one class: the numbering went untested")
print(f"{len(written)} crops as detect.py cuts them ({numbered} numbered)")
