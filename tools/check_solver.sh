#!/usr/bin/env bash
# tools/check_solver.sh — fails when code other than the Solver runs an optimizer step.
#
# One Solver owns the step (ARCHITECTURE.md, rule 4; models/train/solver.h): the trainer, the
# benchmarks and the selftest all call it, so none can drift from what training does. So in the
# C++ sources of kernels/, engine/, data/, models/, bench/ and tools/, only the optimizers
# themselves (engine/optim/) and the Solver (models/train/solver.*) may name the pieces of an
# update: the gradient clipping (clip_gradient_norm), the EMA (ModelEma) and the SGD optimizer
# (Sgd) — not even in a comment, so that a reader finds the step in one place. tests/ check the
# pieces one by one and are not checked.
#
# Usage (from anywhere): tools/check_solver.sh — exits 0 when the rule holds, 1 with one line
# per breach otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

breaches=0
while IFS= read -r -d '' file; do
  case "$file" in
    engine/optim/* | models/train/solver.h | models/train/solver.cpp) continue ;;
  esac
  while IFS=: read -r line text; do
    echo "$file:$line: names a piece of the optimizer step ($(grep -oE \
      'clip_gradient_norm|ModelEma|\bSgd\b' <<<"$text" | head -n 1)); call the Solver" \
      "(models/train/solver.h) instead"
    breaches=$((breaches + 1))
  done < <(grep -nE 'clip_gradient_norm|ModelEma|\bSgd\b' "$file" || true)
done < <(find kernels engine data models bench tools -type f \
              \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0 |
         sort -z)

if [ "$breaches" -gt 0 ]; then
  echo "check_solver: $breaches place(s) outside the Solver run a piece of the optimizer step"
  exit 1
fi
echo "check_solver: only the Solver runs the optimizer step"
