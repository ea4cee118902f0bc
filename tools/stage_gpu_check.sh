#!/usr/bin/env bash
# tools/stage_gpu_check.sh — builds what tools/gpu_check.sh runs, for sm_90 (H100/H200), and
# stages it into one folder of at most 64 MiB that runs on a GPU machine with nothing else of
# bareyolo's: no compiler, no packages (the CUDA libraries come from that machine, e.g. its
# PyTorch wheels; gpu_check.sh finds them).
#
#   tools/stage_gpu_check.sh [STAGE_DIR] [BUILD_DIR]     (defaults: .gpu-stage, build-gpu)
#
# STAGE_DIR/bin: bareyolo, cuda_tests and the GPU benches (stripped); beside it
# models/*.yaml, bench/*.py and the scripts of tools/ the check runs — where the binaries look
# for them (engine/shipped_files.h). BUILD_DIR is configured (Release, WITH_CUDA=ON, CUDA
# architectures 90) if it is not yet; an existing CUDA build directory may be named instead.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=${1:-.gpu-stage}
build=${2:-build-gpu}
limit_mib=64
binaries=(bareyolo cuda_tests bench_gpu_kernels bench_gpu_convolutions bench_gpu_train)

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DWITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
fi
cmake --build "$build" -j "$(nproc)" --target "${binaries[@]}"

# The binaries must carry sm_90 code (a build configured for another architecture would only
# JIT-compile PTX there, or not run at all).
for binary in "${binaries[@]}"; do
  if ! grep -qa 'sm_90' "$build/$binary"; then
    echo "stage_gpu_check: $build/$binary has no sm_90 code: configure $build with" \
         "-DCMAKE_CUDA_ARCHITECTURES=90, or name another build directory" >&2
    exit 1
  fi
done
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/models" "$stage/bench" "$stage/tools"
for binary in "${binaries[@]}"; do
  strip -o "$stage/bin/$binary" "$build/$binary"
done
cp models/*.yaml "$stage/models/"
cp bench/*.py "$stage/bench/"
cp tools/gpu_check.sh tools/compare_outputs.py "$stage/tools/"

# bench_gpu_train's PyTorch peer needs YOLOv5's own code, which the GPU machine lacks and cannot
# download: with YOLOV5_DIR naming the yolov5 package's folder here (pip install yolov5),
# a copy goes to peer/yolov5, which gpu_check.sh hands to the bench. Two stubs beside it stand
# for what YOLOv5 7.0 imports but the step never uses: ultralytics' check_requirements (it
# would pip-install packages) and setuptools' pkg_resources (gone from recent setuptools; only
# parse_version is called).
peer=""
if [ -n "${YOLOV5_DIR:-}" ] && [ -f "$YOLOV5_DIR/__init__.py" ]; then
  mkdir -p "$stage/peer/ultralytics/utils" "$stage/peer/pkg_resources"
  cp -r "$YOLOV5_DIR" "$stage/peer/yolov5"
  find "$stage/peer" -name __pycache__ -prune -exec rm -rf {} +
  : >"$stage/peer/ultralytics/__init__.py"
  : >"$stage/peer/ultralytics/utils/__init__.py"
  printf 'def check_requirements(*args, **kwargs):  # a stub: see tools/stage_gpu_check.sh\n    return True\n' \
    >"$stage/peer/ultralytics/utils/checks.py"
  printf 'from packaging.version import parse as parse_version  # a stub: see tools/stage_gpu_check.sh\n' \
    >"$stage/peer/pkg_resources/__init__.py"
  peer=" and YOLOv5 from $YOLOV5_DIR for the PyTorch peer"
fi

# The device run carries the repository's tracked files too: they count against the limit.
tracked_bytes=$(git ls-files -z 2>/dev/null | xargs -0 -r du -cb 2>/dev/null | tail -n 1 |
                cut -f1 || true)
size_mib=$(( ($(du -sb "$stage" | cut -f1) + ${tracked_bytes:-0}) / 1048576 ))
if [ "$size_mib" -gt "$limit_mib" ]; then
  echo "stage_gpu_check: $stage with the tracked files is $size_mib MiB, over the $limit_mib MiB" \
    "a device run carries" >&2
  exit 1
fi
cat <<EOF
stage_gpu_check: staged $stage ($size_mib MiB of $limit_mib with the tracked files): ${binaries[*]} for sm_90$peer
run it on the GPU machine, from this repository's root (the device tool: carry ["$stage"]):
  tools/gpu_check.sh $stage/bin "\$OUT"
or from the folder alone, copied anywhere:
  $stage/tools/gpu_check.sh $stage/bin OUTDIR
EOF
