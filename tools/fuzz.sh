#!/usr/bin/env bash
# tools/fuzz.sh — build the fuzz targets (fuzz/) with clang's libFuzzer and run each for a while.
#
#   tools/fuzz.sh SECONDS [TARGET...]     (default: every target of fuzz/CMakeLists.txt)
#   FUZZ_OPT=-O0 tools/fuzz.sh 3           (a smoke run, as CI's fuzz_smoke: see the build)
#
# Builds into build-fuzz/ (clang++, ASan + UBSan, ccache when installed), then runs each target
# for SECONDS, as many at once as there are cores, over a copy of its seed corpus
# (fuzz/corpus/TARGET/ and fuzz/regressions/TARGET/; the committed folders are never written),
# in build-fuzz/runs/TARGET/. Each run ends with one line, printed in the targets' order:
#   fuzz TARGET: N execs, K crashes
# A crash is a sanitizer report, a deadly signal, an input that takes over 10 s (a hang) or
# an allocation over 256 MB (no input of a few KB needs that: an allocation bomb). Exits 1
# when any target crashed, naming each reproducer: add it to fuzz/regressions/TARGET/ once the
# parser is fixed (build-fuzz/fuzz/fuzz_TARGET REPRODUCER replays it). Exits 77 (skipped) when clang
# or its libFuzzer runtime is missing (tools/setup.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: tools/fuzz.sh SECONDS [TARGET...]" >&2
  exit 2
fi
seconds=$1
shift
all_targets=$(sed -n '/^set(fuzz_targets/,/)/p' fuzz/CMakeLists.txt | sed 's/set(fuzz_targets//' |
  tr -d ')' | xargs)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || read -r -a targets <<<"$all_targets"
for target in "${targets[@]}"; do
  [[ " $all_targets " == *" $target "* ]] ||
    { echo "fuzz: no target '$target' (the targets: $all_targets)" >&2; exit 2; }
done

# ---- clang with libFuzzer, or skipped ----
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
  >"$probe_dir/probe.cpp"
if ! command -v clang++ >/dev/null ||
  ! clang++ -fsanitize=fuzzer "$probe_dir/probe.cpp" -o "$probe_dir/probe" 2>/dev/null; then
  echo "fuzz: skipped: clang++ with libFuzzer is not installed (apt-get install clang" \
    "libclang-rt-dev, as tools/setup.sh does)"
  exit 77
fi

# ---- the build: only the targets asked for ----
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O1 with line tables: the build stays quick and a report names the file and line. FUZZ_OPT
# sets the level: -O0 builds in two thirds of the time (54 s to 79 on 2 cores) and runs 2-5 times
# fewer inputs a second, the better trade for a run of a few seconds.
opt=${FUZZ_OPT:--O1}
[[ $opt =~ ^-O[0-3gsz]?$ ]] || { echo "fuzz: FUZZ_OPT '$opt' is not an -O level" >&2; exit 2; }
cmake -S . -B build-fuzz -DBAREYOLO_FUZZ=ON -DWITH_CUDA=OFF -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt -g1" \
  "${launcher[@]}" >build-fuzz.log
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}" >>build-fuzz.log ||
  { tail -n 50 build-fuzz.log; exit 1; }

# ---- the runs: one fuzzer per core at a time (each is one process), reported in order ----
# fuzz_one TARGET: runs TARGET for $seconds and writes its report to build-fuzz/runs/TARGET/report
# (the line `fuzz TARGET: N execs, K crashes`, then what each crash left).
fuzz_one() {
  local target=$1 run=build-fuzz/runs/$1 status=0
  rm -rf "$run"
  mkdir -p "$run/corpus" "$run/crashes"
  cp -r "fuzz/corpus/$target/." "$run/corpus/"
  [ -d "fuzz/regressions/$target" ] && cp -r "fuzz/regressions/$target/." "$run/corpus/"
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    "build-fuzz/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=256 -print_final_stats=1 -artifact_prefix="$run/crashes/" \
    "$run/corpus" >"$run/log" 2>&1 || status=$?
  # libFuzzer's final statistics; its last status line when it died before printing them.
  local execs crashes
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/log" | tail -n 1)
  [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9]*\).*/\1/p' "$run/log" | tail -n 1)
  crashes=$(find "$run/crashes" -type f | wc -l)
  if [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi  # died without an input
  {
    echo "fuzz $target: ${execs:-0} execs, $crashes crashes"
    if [ "$crashes" -gt 0 ]; then
      grep -m 5 -E "ERROR: |runtime error|==ERROR|SUMMARY" "$run/log" | sed 's/^/  /' || true
      find "$run/crashes" -type f | sed 's/^/  reproducer: /'
      echo "  log: $run/log"
    fi
  } >"$run/report"
}
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  fuzz_one "$target" &
done
wait
failed=0
for target in "${targets[@]}"; do
  cat "build-fuzz/runs/$target/report"
  grep -q ", 0 crashes$" "build-fuzz/runs/$target/report" || failed=1
done
exit "$failed"
