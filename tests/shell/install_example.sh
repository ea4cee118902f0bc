#!/usr/bin/env bash
# tests/shell/install_example.sh BUILD_DIR IMAGE — a program outside the tree built against an
# installed bareyolo predicts as `bareyolo predict` does. BUILD_DIR is installed into a
# temporary prefix (`cmake --install --prefix`); docs/examples/predict is configured against it
# with -DCMAKE_PREFIX_PATH (find_package(bareyolo), bareyolo::bareyolo) and built, and compiled
# once more with g++ and `pkg-config --cflags --libs bareyolo`. Both run Model::predict on IMAGE
# with He-scaled fresh weights (tests/shell/he_scaled_weights.py, which also records the yaml in
# them), and must print the detections that the installed `bareyolo predict` writes: the same
# count (more than none), classes, scores within 1e-4 and boxes within 0.01 px. Exits 77
# (skipped), saying why, without a Python that has numpy.
set -euo pipefail
build=$(cd "$1" && pwd) image=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$here/python_with.sh"
python=$(python_with numpy "$repo/.venv-onnx/bin/python3" /usr/bin/python3 python3)
[ -n "$python" ] || { echo "skipped: no Python with numpy (for he_scaled_weights.py)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$repo/docs/examples/predict" -B "$work/example" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" || { cat "$work/configure.log"; fail "configure"; }
cmake --build "$work/example" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build"; }
# shellcheck disable=SC2046  # pkg-config's flags are words
g++ -O1 -o "$work/predict_pkgconfig" "$repo/docs/examples/predict/predict_api.cpp" \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs bareyolo)

cd "$work"
cfg=$prefix/share/bareyolo/models/yolov5-tiny.yaml
"$prefix/bin/bareyolo" init --cfg "$cfg" --nc 3 --seed 2 --out fresh.safetensors >/dev/null
"$python" "$here/he_scaled_weights.py" fresh.safetensors w.safetensors "cfg=$cfg" "names=a|b|c"
conf=0.001
"$work/example/predict_api" w.safetensors "$image" $conf >api.txt
"$work/predict_pkgconfig" w.safetensors "$image" $conf >pkgconfig.txt
cmp -s api.txt pkgconfig.txt || fail "the pkg-config build printed other detections"
"$prefix/bin/bareyolo" predict --cfg "$cfg" --weights w.safetensors --source "$image" \
  --conf $conf --out pred >/dev/null
"$python" - api.txt pred/detections.json <<'PY'
import json, sys
names = ["a", "b", "c"]
api = [line.split() for line in open(sys.argv[1])]
cli = json.load(open(sys.argv[2]))
if not api or len(api) != len(cli):
    sys.exit(f"FAIL: Model::predict found {len(api)} detections, bareyolo predict {len(cli)}")
for (name, score, *box), d in zip(api, cli):
    x, y, w, h = d["bbox"]
    box_difference = max(abs(float(a) - b) for a, b in zip(box, [x, y, x + w, y + h]))
    if name != names[d["category_id"]] or abs(float(score) - d["score"]) > 1e-4 or box_difference > 1e-2:
        sys.exit(f"FAIL: Model::predict {name} {score} {box}; bareyolo predict {d}")
print(f"installed prefix: find_package and pkg-config builds predict the {len(api)} detections "
      "of bareyolo predict")
PY
echo "install example: all steps passed"
