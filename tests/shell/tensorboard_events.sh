#!/usr/bin/env bash
# tests/shell/tensorboard_events.sh BAREYOLO MODEL_YAML — a 3-epoch run of the tiny model on
# 16 built-in shapes images at 64 px writes a TensorBoard events file that TensorBoard's own
# reader lists with YOLOv5's scalars (tensorboard_read.py), and --no-tensorboard writes none.
# Exits 77 (ctest: skipped), saying why, without a Python that has the tensorboard package:
# $BAREYOLO_TENSORBOARD_PYTHON, then the .venv-tensorboard that tools/setup.sh makes, then python3.
set -euo pipefail
bareyolo=$1 cfg=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$here/python_with.sh"

python=$(python_with tensorboard "${BAREYOLO_TENSORBOARD_PYTHON:-}" \
  "$repo/.venv-tensorboard/bin/python3" python3)
if [ -z "$python" ]; then
  echo "skipped: no Python with the tensorboard package (tools/setup.sh installs it into" \
       ".venv-tensorboard; or set BAREYOLO_TENSORBOARD_PYTHON)"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bareyolo" make-shapes --out "$work/shapes" --n-train 16 --n-val 4 --imgsz 64 --classes 2 \
  >/dev/null
train=("$bareyolo" train --data "$work/shapes/data.yaml" --cfg "$cfg" --batch 4 --imgsz 64
       --workers 1 --device cpu --noplots --project "$work/runs")
"${train[@]}" --epochs 3 --name exp >/dev/null
ls "$work/runs/exp"/events.out.tfevents.* >/dev/null
"$python" "$here/tensorboard_read.py" "$work/runs/exp" 3

"${train[@]}" --epochs 1 --name quiet --no-tensorboard >/dev/null
if ls "$work/runs/quiet"/events.out.tfevents.* 2>/dev/null; then
  echo "FAIL: --no-tensorboard wrote an events file"
  exit 1
fi
echo "tensorboard_events: ok"
