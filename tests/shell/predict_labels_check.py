"""tests/shell/predict_labels_check.py FOLDER SOURCE — `bareyolo predict --save-txt --save-conf`
run on the JPEGs of SOURCE into FOLDER: its labels/<stem>.txt and detections.json describe the
same detections. Each file's lines are, in order, its image's detections.json entries as
detect.py writes them: class, box centre x and y, width, height (normalised by the image's
size), confidence; detections.json's bbox is COCO's [x, y, w, h] in pixels and an image's id is
its stem as a number when the stem is one (COCO's ids); an image without detections has no
file."""
import collections
import json
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ beside the sources
from jpeg_size import jpeg_size  # noqa: E402

folder, source = sys.argv[1:]
by_image = collections.defaultdict(list)
for d in json.load(open(os.path.join(folder, "detections.json"))):
    by_image[d["image_id"]].append(d)
checked = 0
for file in sorted(os.listdir(source)):
    stem = os.path.splitext(file)[0]
    image_id = int(stem) if stem.isdigit() else stem
    if stem.isdigit() and str(image_id) in by_image:
        sys.exit(f"FAIL: {file}'s image_id is the text '{image_id}', not the number")
    found = by_image.get(image_id, [])
    txt = os.path.join(folder, "labels", stem + ".txt")
    if not found:
        if os.path.exists(txt):
            sys.exit(f"FAIL: {txt} written for an image without detections")
        continue
    width, height = jpeg_size(os.path.join(source, file))
    lines = [[float(v) for v in line.split()] for line in open(txt).read().splitlines()]
    if len(lines) != len(found):
        sys.exit(f"FAIL: {txt} has {len(lines)} lines for {len(found)} detections")
    for line, d in zip(lines, found):
        x, y, w, h = d["bbox"]
        want = [d["category_id"], (x + w / 2) / width, (y + h / 2) / height, w / width,
                h / height, d["score"]]
        # %g keeps 6 significant digits
        if line[0] != want[0] or any(abs(a - b) > 1e-5 + 1e-5 * abs(b) for a, b in zip(line, want)):
            sys.exit(f"FAIL: {txt}: '{' '.join(map(str, line))}' where detections.json says {want}")
        checked += 1
if checked == 0:
    sys.exit("FAIL: no detection was compared")
print(f"predict labels: {checked} detections agree")
