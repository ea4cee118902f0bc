#!/usr/bin/env bash
# tools/gpu_check.sh — the whole check for a machine with a GPU, in one run of a few minutes:
#
#   tools/gpu_check.sh [BUILD_DIR]        (default: build)
#
#  1. finds the CUDA libraries the binaries need (cuDNN, NCCL, cuBLAS): on a GPU machine
#     without the toolkit they come as Python wheels (nvidia-cudnn-cu13, nvidia-nccl-cu13,
#     nvidia-cublas: site-packages/nvidia/*/lib), so their folders go on LD_LIBRARY_PATH;
#  2. checks with ldd that every library of the binaries resolves, before running anything;
#  3. runs BUILD_DIR/cuda_tests (every CUDA kernel against the CPU, NCCL at world size 1) and
#     BUILD_DIR/bench_gpu_kernels, under time limits of 120 s and 90 s (under 4 minutes in all);
#  4. prints a short table last.
# The binaries are built elsewhere (cmake -DCMAKE_CUDA_ARCHITECTURES=90) and carried: BUILD_DIR
# needs only cuda_tests and bench_gpu_kernels (both link yaml-cpp and the CUDA runtime
# statically; glibc 2.36 or newer). Nothing is compiled here. Logs go to $OUT when it is set (the device tool's output folder), else to a
# temporary folder. Exit status: 0 when every step passed, 1 otherwise.
set -uo pipefail

build=${1:-build}
logs=${OUT:-$(mktemp -d)}
mkdir -p "$logs"
binaries=(cuda_tests bench_gpu_kernels)
declare -a summary=()
failed=0
note() { summary+=("$(printf '%-20s %-8s %6ss  %s' "$1" "$2" "$3" "$4")"); }

# ---- 1. libraries --------------------------------------------------------------------
t0=$(date +%s)
declare -a lib_dirs=()
search_roots=()
for root in /opt /usr/local/lib /usr/lib /root/.local/lib "${HOME:-/root}/.local/lib" \
            /usr/local/cuda/lib /usr/local/cuda/lib64; do
  [ -d "$root" ] && search_roots+=("$root")
done
# Wheel folders first (site-packages/nvidia/<lib>/lib), then anything else that has them.
while IFS= read -r dir; do
  lib_dirs+=("$dir")
done < <(find "${search_roots[@]}" -maxdepth 10 \
           \( -name 'libcudnn.so.9' -o -name 'libnccl.so.2' -o -name 'libcublas.so.13' \
              -o -name 'libcublasLt.so.13' \) 2>/dev/null |
         xargs -r -n1 dirname | awk '!seen[$0]++' |
         awk '/site-packages|dist-packages/ {print; next} {rest[++n]=$0} END {for (i=1;i<=n;i++) print rest[i]}')
if [ ${#lib_dirs[@]} -gt 0 ]; then
  joined=$(IFS=:; echo "${lib_dirs[*]}")
  export LD_LIBRARY_PATH="$joined${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
{
  echo "library folders: ${lib_dirs[*]:-(none found)}"
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
} > "$logs/environment.log" 2>&1
cat "$logs/environment.log"

# ---- 2. ldd --------------------------------------------------------------------------
missing=""
for binary in "${binaries[@]}"; do
  path="$build/$binary"
  if [ ! -x "$path" ]; then
    missing+="$binary: not in $build (build it with -DWITH_CUDA=ON and carry it); "
    continue
  fi
  unresolved=$(ldd "$path" 2>&1 | grep -E 'not found|not a dynamic' || true)
  [ -n "$unresolved" ] && missing+="$binary: $(echo "$unresolved" | tr '\n' ' '); "
done
ldd "$build/cuda_tests" > "$logs/ldd.log" 2>&1
if [ -n "$missing" ]; then
  note libraries FAIL $(( $(date +%s) - t0 )) "$missing"
  failed=1
else
  note libraries ok $(( $(date +%s) - t0 )) "${#lib_dirs[@]} folder(s) on LD_LIBRARY_PATH; ldd clean"
fi

# ---- 3. tests and bench --------------------------------------------------------------
# run NAME LIMIT_S COMMAND...: runs with a time limit, log in $logs/NAME.log; sets $rc.
run() {
  local name=$1 limit=$2
  shift 2
  local start=$(date +%s)
  echo "== $name"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$logs/$name.log"
  rc=${PIPESTATUS[0]}
  elapsed=$(( $(date +%s) - start ))
}

if [ -z "$missing" ]; then
  run cuda_tests 120 "$build/cuda_tests" --duration=true
  counts=$(grep -E '^\[doctest\] test cases:' "$logs/cuda_tests.log" | tail -n1 | sed 's/\[doctest\] //')
  case $rc in
    0) note cuda_tests passed "$elapsed" "$counts" ;;
    77) note cuda_tests SKIPPED "$elapsed" "$(head -n1 "$logs/cuda_tests.log")"; failed=1 ;;
    124|137) note cuda_tests TIMEOUT "$elapsed" "killed after 120 s; see cuda_tests.log"; failed=1 ;;
    *) note cuda_tests FAIL "$elapsed" "exit $rc; $counts"; failed=1 ;;
  esac

  run bench_gpu_kernels 90 "$build/bench_gpu_kernels"
  result=$(grep -E '^RESULT ' "$logs/bench_gpu_kernels.log" | tail -n1)
  case $rc in
    0) note bench_gpu_kernels ok "$elapsed" "$result" ;;
    77) note bench_gpu_kernels SKIPPED "$elapsed" "$(head -n1 "$logs/bench_gpu_kernels.log")"; failed=1 ;;
    *) note bench_gpu_kernels FAIL "$elapsed" "exit $rc"; failed=1 ;;
  esac
fi

# ---- 4. summary ----------------------------------------------------------------------
{
  echo
  echo "== gpu_check summary (logs in $logs)"
  printf '%-20s %-8s %7s  %s\n' step result time detail
  printf '%s\n' "${summary[@]}"
} | tee "$logs/summary.log"
exit $failed
