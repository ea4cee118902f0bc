#!/usr/bin/env bash
# tools/check_layers.sh — fails when a room includes a room above it.
#
# The layers, lowest first (docs/layout.md says what each holds):
#   kernels <- engine <- data <- models (yolo; loss and eval, which build on yolo only)
#           <- train (models/train) <- api (models/api) and the selftest's checks (tools/selftest),
#           side by side <- the CLI (tools/bareyolo); the ONNX export (models/export, on yolo) and
#           its binary (tools/export) beside them
# A file may include its own room and the rooms below it. CMake builds one static library per
# layer linking only the layers below, so an upward call would not link either; this check
# names the file and line at once, and catches the includes that compile without linking
# (a header-only use). tests/, bench/ and docs/ use every layer and are not checked.
#
# Usage (from anywhere): tools/check_layers.sh — exits 0 when every include goes down, 1 with
# one line per upward include otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

# The room of a path: the longest matching prefix.
room_of() {
  case "$1" in
    kernels/*) echo kernels ;;
    engine/*) echo engine ;;
    data/*) echo data ;;
    models/yolo/*) echo yolo ;;
    models/loss/*) echo loss ;;
    models/eval/*) echo eval ;;
    models/train/*) echo train ;;
    models/api/*) echo api ;;
    models/export/*) echo export ;;
    tools/export/*) echo export_cli ;;
    tools/selftest/*) echo selftest ;;
    tools/bareyolo/*) echo cli ;;
    *) echo other ;;
  esac
}

# What each room may include (its own room and those below it).
declare -A may_include=(
  [kernels]="kernels"
  [engine]="kernels engine"
  [data]="kernels engine data"
  [yolo]="kernels engine data yolo"
  [loss]="kernels engine data yolo loss"
  [eval]="kernels engine data yolo eval"
  [train]="kernels engine data yolo loss eval train"
  [api]="kernels engine data yolo loss eval train api"
  [selftest]="kernels engine data yolo loss eval train selftest"
  [cli]="kernels engine data yolo loss eval train selftest cli"
  [export]="kernels engine data yolo export"
  [export_cli]="kernels engine data yolo export cli export_cli"
)

violations=0
while IFS= read -r -d '' file; do
  from=$(room_of "$file")
  allowed=" ${may_include[$from]} "
  # grep -n: "line:#include "path"" for every quoted include of the file.
  while IFS=: read -r line text; do
    [[ $text =~ \#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]] || continue
    target=${BASH_REMATCH[1]}
    to=$(room_of "$target")
    [ "$to" = other ] && continue  # a system or third-party header
    if [[ $allowed != *" $to "* ]]; then
      echo "$file:$line: $from includes $target ($to); $from may include only:${may_include[$from]// /, }" \
           | sed 's/only:/only: /'
      violations=$((violations + 1))
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" || true)
done < <(find kernels engine data models tools/selftest tools/bareyolo tools/export -type f \
              \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print0 | sort -z)

if [ "$violations" -gt 0 ]; then
  echo "check_layers: $violations include(s) go up a layer (see docs/layout.md)" >&2
  exit 1
fi
echo "check_layers: every include goes down a layer"
