#!/usr/bin/env bash
# tests/shell/onnx_export.sh BAREYOLO MODEL_YAML IMAGES — `bareyolo export` checked by ONNX Runtime:
# fresh weights exported with batch 1 and with a dynamic batch, `bareyolo predict --save-raw`
# on the real photographs in IMAGES, then tests/shell/onnx_runtime_check.py compares the
# graphs' outputs and their detections after NMS with bareyolo's and reads their metadata back,
# and tests/shell/opencv_dnn_check.py runs the batch-1 graph in OpenCV's DNN against ONNX
# Runtime; then the same for a PyTorch YOLOv5 .pt fixture, and its graph against the one
# exported from its conversion to safetensors. Also: opsets 13 and 17 give the same outputs,
# out-of-range opsets and a wrong count of class names are refused, and weights without names
# at a size off the stride export as YOLOv5 does (class0.., the size rounded up). Exits 77
# (ctest: skipped), saying why, when no Python with onnxruntime is found: $BAREYOLO_ONNX_PYTHON,
# then the .venv-onnx that tools/setup.sh makes, then python3. Without a Python that has cv2
# ($BAREYOLO_OPENCV_PYTHON, the .venv-onnx, /usr/bin/python3, python3) the OpenCV step alone is
# skipped, saying so.
set -euo pipefail
bareyolo=$1 cfg=$2 images=$3
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$here/python_with.sh"

opencv_python=$(python_with "numpy, cv2" "${BAREYOLO_OPENCV_PYTHON:-}" \
  "$repo/.venv-onnx/bin/python3" /usr/bin/python3 python3)
python=$(python_with "numpy, onnxruntime" "${BAREYOLO_ONNX_PYTHON:-}" \
  "$repo/.venv-onnx/bin/python3" python3)
if [ -z "$python" ]; then
  echo "skipped: no Python with onnxruntime and numpy (tools/setup.sh installs them into" \
       ".venv-onnx; or set BAREYOLO_ONNX_PYTHON)"
  exit 77
fi
if [ ! -x "$(dirname "$bareyolo")/bareyolo-export" ]; then
  echo "skipped: this build has no bareyolo-export (it needs libonnx-dev and libprotobuf-dev)"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# conf 0.002 and IoU 0.45: fresh weights score low, and this keeps some hundreds of boxes.
# The fresh weights are He-scaled (he_scaled_weights.py) so that their outputs depend on the
# image and NMS compares detections, not the order of ties; their BatchNorms are random, so the
# folded graph is held against bareyolo's unfolded forward. The names need Python's quoting: a
# single quote, both quotes, a backslash.
conf=0.002 iou=0.45 imgsz=320 names="o'clock|say \"it's\"|back\\slash"
"$bareyolo" init --cfg "$cfg" --nc 3 --seed 3 --out "$work/fresh.safetensors" >/dev/null
"$python" "$here/he_scaled_weights.py" "$work/fresh.safetensors" "$work/w.safetensors" "names=$names"
"$bareyolo" export --format onnx --cfg "$cfg" --weights "$work/w.safetensors" --imgsz $imgsz \
  --out "$work/static.onnx"
"$bareyolo" export --format onnx --cfg "$cfg" --weights "$work/w.safetensors" --imgsz $imgsz \
  --dynamic --out "$work/dynamic.onnx"
"$bareyolo" predict --cfg "$cfg" --weights "$work/w.safetensors" --source "$images" \
  --imgsz $imgsz --conf $conf --iou $iou --out "$work/pred" --save-raw "$work/raw.safetensors"
"$python" "$here/onnx_runtime_check.py" "$work/static.onnx" "$work/dynamic.onnx" \
  "$work/raw.safetensors" "$work/pred/detections.json" $conf $iou "$names" 32 "$work/ort.npz"
if [ -n "$opencv_python" ]; then
  "$opencv_python" "$here/opencv_dnn_check.py" "$work/static.onnx" "$work/ort.npz"
else
  echo "skipped the OpenCV step: no Python with cv2 (tools/setup.sh installs it into .venv-onnx)"
fi

# Opsets from 13 on take Split's sizes as an input, not an attribute: 13 and the newest
# written give the batch-1 graph's outputs exactly.
for opset in 13 17; do
  "$bareyolo" export --format onnx --cfg "$cfg" --weights "$work/w.safetensors" --imgsz $imgsz \
    --opset $opset --out "$work/opset$opset.onnx" >/dev/null
  "$python" "$here/onnx_same_outputs.py" "$work/static.onnx" "$work/opset$opset.onnx" \
    "$work/ort.npz"
done

# Refused in words (refuses.sh), writing nothing: an opset outside 12..17, class names that are
# not one per class.
source "$here/refuses.sh"
export_w=("$bareyolo" export --format onnx --cfg "$cfg" --weights "$work/w.safetensors")
refuses "not in range 12 to 17" "${export_w[@]}" --imgsz $imgsz --opset 11 --out "$work/no.onnx"
refuses "not in range 12 to 17" "${export_w[@]}" --imgsz $imgsz --opset 18 --out "$work/no.onnx"
"$python" "$here/he_scaled_weights.py" "$work/fresh.safetensors" "$work/two-names.safetensors" \
  "names=a|b"
refuses "2 class names for a model of 3 classes" "$bareyolo" export --format onnx --cfg "$cfg" \
  --weights "$work/two-names.safetensors" --imgsz $imgsz --out "$work/no.onnx"
test ! -e "$work/no.onnx" || { echo "FAIL: a refused export wrote $work/no.onnx"; exit 1; }

# Weights without names: the graph names the classes class0, class1, ... as YOLOv5 does. A size
# that is not a multiple of the stride is rounded up to one, saying so, as YOLOv5's export does.
said=$("$bareyolo" export --format onnx --cfg "$cfg" --weights "$work/fresh.safetensors" \
  --imgsz 100 --out "$work/unnamed.onnx")
grep -qF "is not a multiple of the model's stride 32: using 128" <<< "$said" ||
  { echo "FAIL: --imgsz 100 said: $said"; exit 1; }
"$python" -c 'import ast, sys, onnxruntime
session = onnxruntime.InferenceSession(sys.argv[1])
names = ast.literal_eval(session.get_modelmeta().custom_metadata_map["names"])
shape = session.get_inputs()[0].shape
sys.exit(0 if names == {0: "class0", 1: "class1", 2: "class2"} and shape == [1, 3, 128, 128] else
         f"FAIL: weights without names, --imgsz 100: names {names}, input {shape}")' \
  "$work/unnamed.onnx"

# A PyTorch YOLOv5 checkpoint (tests/fixtures/torch/best.pt: fp16, 80 COCO classes, 64 px),
# exported without --cfg and checked the same way against `bareyolo predict` on the .pt, its
# metadata against the names PyTorch wrote beside it; then its conversion to safetensors
# exported too: both graphs give the same outputs. The barely trained model scores all below
# 3e-4, many nearly alike: conf 1e-4 keeps 4 detections an image whose scores differ by 20x
# more than the graph's rounding (at 1e-6, near-ties reorder NMS).
torch=$repo/tests/fixtures/torch conf=1e-4 imgsz=64
coco_names=$("$python" -c 'import json, struct, sys
with open(sys.argv[1], "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
print("|".join(header["__metadata__"]["names"].split("\n")))' "$torch/best.state.safetensors")
for graph in "pt.onnx" "pt-dynamic.onnx --dynamic"; do
  # shellcheck disable=SC2086  # the graph's name and its flags
  set -- $graph
  "$bareyolo" export --format onnx --weights "$torch/best.pt" --imgsz $imgsz --out "$work/$1" \
    "${@:2}" >/dev/null
done
"$bareyolo" predict --weights "$torch/best.pt" --source "$images" --imgsz $imgsz --conf $conf \
  --iou $iou --out "$work/pt-pred" --save-raw "$work/pt-raw.safetensors" >/dev/null
"$python" "$here/onnx_runtime_check.py" "$work/pt.onnx" "$work/pt-dynamic.onnx" \
  "$work/pt-raw.safetensors" "$work/pt-pred/detections.json" $conf $iou "$coco_names" 32 \
  "$work/pt-ort.npz"
"$bareyolo" convert --weights "$torch/best.pt" --out "$work/converted.safetensors" >/dev/null
"$bareyolo" export --format onnx --weights "$work/converted.safetensors" --imgsz $imgsz \
  --out "$work/converted.onnx" >/dev/null
"$python" "$here/onnx_same_outputs.py" "$work/pt.onnx" "$work/converted.onnx" "$work/pt-ort.npz"
echo "onnx export: all steps passed"
