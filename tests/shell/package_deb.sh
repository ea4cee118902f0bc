#!/usr/bin/env bash
# tests/shell/package_deb.sh BUILD_DIR IMAGE — the .deb that `cpack -G DEB` makes from BUILD_DIR
# installs and runs with nothing of the checkout: unpacked with `dpkg-deb -x` into a temporary
# root (no container, no root rights), its bareyolo shows --help, writes fresh weights of a
# model yaml named relatively (found in ROOT/usr/share/bareyolo, beside its bin/), predicts on
# IMAGE and exports ONNX through the packaged bareyolo-export; with that yaml removed from the
# root, init fails (the checkout, which has it, is never looked in). Exits 77
# (skipped), saying why, without cpack or dpkg-deb.
set -euo pipefail
build=$(cd "$1" && pwd) image=$(realpath "$2")
repo=$(cd "$(dirname "$0")/../.." && pwd)
for tool in cpack dpkg-deb; do
  if ! command -v $tool >/dev/null; then echo "skipped: no $tool"; exit 77; fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/deb" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack -G DEB failed"; }
deb=$(ls "$work"/deb/*.deb)
echo "package: $(basename "$deb"), $(du -k "$deb" | cut -f1) kB;" \
     "Depends: $(dpkg-deb -f "$deb" Depends)"
dpkg-deb -x "$deb" "$work/root"
bin=$work/root/usr/bin
mkdir "$work/run" && cd "$work/run"  # a folder with no models/ in it
unset BAREYOLO_HOME

"$bin/bareyolo" --help | grep -q "^Usage: .*bareyolo" || fail "bareyolo --help"
"$bin/bareyolo" init --cfg models/yolov5-tiny.yaml --nc 2 --out w.safetensors
"$bin/bareyolo" predict --cfg models/yolov5-tiny.yaml --weights w.safetensors --source "$image" \
  --imgsz 64 --out pred
[ -s pred/detections.json ] || fail "predict wrote no detections.json"
if [ -x "$build/bareyolo-export" ]; then
  "$bin/bareyolo" export --cfg models/yolov5-tiny.yaml --weights w.safetensors --imgsz 64 \
    --out w.onnx | head -1
  [ -s w.onnx ] || fail "the packaged bareyolo-export wrote no w.onnx"
fi

# Nothing falls back to the checkout (which has the yaml): without the packaged one, none is found.
rm "$work/root/usr/share/bareyolo/models/yolov5-tiny.yaml"
if "$bin/bareyolo" init --cfg models/yolov5-tiny.yaml --out x.safetensors >missing.log 2>&1; then
  fail "init found models/yolov5-tiny.yaml with the packaged copy removed"
fi
if grep -q "$repo" missing.log; then cat missing.log; fail "the packaged binary looked in $repo"; fi
echo "package deb: all steps passed"
