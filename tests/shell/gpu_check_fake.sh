#!/usr/bin/env bash
# tests/shell/gpu_check_fake.sh — tools/gpu_check.sh against a fake build that fails loudly, so
# that the script itself is tested where no GPU is: every failure must show in the summary
# (never as passed or skipped), each CUDA test case runs in its own process (a hanging case
# is killed at its limit and the cases after it still run; the NCCL cases run last; a comma
# in a name survives doctest's filter), the first failing case is rerun under
# compute-sanitizer, the phases (A, S, B) stop at their budgets, at most 8 files land in
# OUTDIR, and the exit status is 1.
#
#   tests/shell/gpu_check_fake.sh        (run by ctest as gpu_check_fake)
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build=$tmp/build fake_bin=$tmp/path out=$tmp/out
mkdir -p "$build" "$fake_bin"
fail() {
  echo "gpu_check_fake: FAIL: $*"
  echo "---- summary.log"
  cat "$out/summary.log" 2>/dev/null
  exit 1
}

cat >"$build/cuda_tests" <<'EOF'
#!/usr/bin/env bash
case "$1" in
  --list-test-cases)
    printf '[doctest] listing all test case names\n====\n'
    printf 'nccl: a rank that never joins\ncuda ok, with a comma\ncuda failing case\n'
    printf 'cuda hanging case\ncuda after the hang\n====\n' ;;
  --test-case=*)
    name=${1#--test-case=}
    echo "ran: $name"
    case $name in
      'cuda ok\, with a comma' | 'cuda after the hang' | 'nccl: a rank that never joins') exit 0 ;;
      'cuda failing case') echo "CUDA error: an illegal memory access was encountered"; exit 1 ;;
      'cuda hanging case') sleep 60 ;;
      *) echo "no such case: $name"; exit 3 ;;
    esac ;;
esac
EOF
# The rest of the build: a GPU that is not there (exit 77 must count as a failure), commands
# that fail with a CUDA error, a bench that prints a RESULT and then hangs (its row is a timeout
# that keeps the RESULT; the small job's run fails); bench_gpu_convolutions is missing
# altogether.
cat >"$build/bench_gpu_kernels" <<'EOF'
#!/usr/bin/env bash
echo "skipped: no usable CUDA driver or device"
exit 77
EOF
cat >"$build/bench_gpu_train" <<'EOF'
#!/usr/bin/env bash
echo "RESULT ours_img_s=12.00 ours_host_waits_per_step=0.00"
[[ " $* " == *" --imgsz 320 "* ]] && exit 1
sleep 60
EOF
cat >"$build/bareyolo" <<'EOF'
#!/usr/bin/env bash
case "$1" in
  devices) echo "cuda: none (no usable CUDA driver or device)"; exit 1 ;;
  make-shapes) mkdir -p "$3" && echo "path: ." >"$3/data.yaml" ;;
  *) echo "bareyolo: error: CUDA error: an illegal memory access ($1)"; exit 1 ;;
esac
EOF
cat >"$fake_bin/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
echo "========= COMPUTE-SANITIZER"
shift 2
"$@"
echo "========= ERROR SUMMARY: 1 error"
EOF
cat >"$fake_bin/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
exit 9
EOF
chmod +x "$build"/* "$fake_bin"/*

start=$(date +%s)
PATH="$fake_bin:$PATH" GPU_CHECK_SEARCH_ROOTS="$tmp/none" GPU_CHECK_PHASE_A_S=30 \
  GPU_CHECK_PHASE_S_S=14 GPU_CHECK_PHASE_B_S=15 GPU_CHECK_CASE_S=3 "$repo/tools/gpu_check.sh" "$build" "$out" \
  >"$tmp/stdout" 2>&1
status=$?
seconds=$(($(date +%s) - start))
summary=$out/summary.log

[ "$status" -eq 1 ] || fail "exit status $status, expected 1"
[ "$seconds" -le 75 ] || fail "took ${seconds}s; the phases allow 30 + 14 + 15"
files=$(find "$out" -type f | wc -l)
[ "$files" -le 8 ] || fail "$files files in OUTDIR (at most 8)"
grep -q 'environment  *FAIL.*bench_gpu_convolutions missing' "$summary" || fail "environment row"
grep -q 'environment  *FAIL.*no usable GPU' "$summary" || fail "no GPU is not a failure"
grep -q 'cuda_tests  *FAIL.*3 of 5 passed' "$summary" || fail "cuda_tests counts"
grep -q 'cuda failing case (FAIL, exit 1)' "$summary" || fail "the failing case is not named"
grep -q 'cuda hanging case (TIMEOUT' "$summary" || fail "the hanging case is not a timeout"
grep -q "sanitizer.*'cuda failing case' rerun under memcheck.*ERROR SUMMARY: 1 error" "$summary" ||
  fail "the first failure is not rerun under compute-sanitizer"
last_case=$(grep '^ran: ' "$out/cuda_tests.log" | tail -n 1)
[ "$last_case" = "ran: nccl: a rank that never joins" ] || fail "the NCCL case is not last: $last_case"
grep -q '^ran: cuda after the hang$' "$out/cuda_tests.log" || fail "the case after the hang did not run"
grep -q '^ran: cuda ok\\, with a comma$' "$out/cuda_tests.log" || fail "the comma was not escaped"
grep -q 'train_yolov5s_640  *FAIL' "$summary" || fail "train row"
grep -q 'bench_gpu_kernels  *FAIL' "$summary" || fail "exit 77 of a GPU bench is not a failure"
grep -q 'bench_gpu_convolutions  *FAIL' "$summary" || fail "a missing bench is not a failure"
grep -q 'bench_gpu_train  *TIMEOUT.*its last RESULT before: RESULT ours_img_s=12.00' "$summary" ||
  fail "a bench cut short does not keep its RESULT"
for step in train_yolov5s_640 bench_gpu_kernels bench_gpu_convolutions bench_gpu_train \
            cudnn_choices_gpu; do
  grep -qE "^S  $step +(FAIL|TIMEOUT|NOT RUN)" "$summary" || fail "phase S step $step has no failing row"
done
for step in two_ranks_one_gpu amp_gpu nccl_world1 resume_gpu_checkpoint grads_gpu_vs_cpu \
            amp_grads_gpu_vs_cpu cuda_graph_gpu val_predict_gpu_vs_cpu sharded_val_gpu \
            elastic_restart_gpu selftest bench_gpu_train_small; do
  grep -qE "^B  $step +(FAIL|TIMEOUT|NOT RUN)" "$summary" || fail "phase B step $step has no failing row"
done
grep -q 'ok  ' <(grep -v sanitizer "$summary") && fail "a step of the fake build reads as passed"
grep -q '== gpu_check: FAILED' "$summary" || fail "no final verdict"
[ "$(grep -c '^gate .* not yet  *cuda_tests=FAIL' "$summary")" -eq 3 ] ||
  fail "the three gates do not all wait on the failed CUDA cases"
grep -q '^gate .*--cuda-graph auto.*cuda_graph_nccl_gpu=FAIL' "$summary" ||
  fail "the NCCL graph gate does not name its step's result"
grep -q '^gate .* ready' "$summary" && fail "a gate of the fake build reads as ready"
# Each gate names its switch, and the switch is there to open.
switches=$(grep -o '(#[0-9]*)|[a-z0-9_]*|' "$repo/tools/gpu_check.sh" | cut -d'|' -f2)
[ "$(wc -w <<<"$switches")" -eq 3 ] || fail "the gates name the switches '$switches'"
for switch in $switches; do
  grep -q "bool $switch = " "$repo/models/train/gated_defaults.h" ||
    fail "the gate switch $switch is not in models/train/gated_defaults.h"
done
[ "$(grep -c '  bool [a-z0-9_]* = ' "$repo/models/train/gated_defaults.h")" -eq 3 ] ||
  fail "models/train/gated_defaults.h has another number of switches than the 3 gates"

# A phase's budget bounds its steps: with 12 s for phase A, the hanging case takes what is left
# of it; with none for phase S, none of its steps starts (NOT RUN, still a failure); the whole
# check's 14 s leave phase B less than the 5 s a step needs, and the gates still end the summary.
rm -rf "$out"
start=$(date +%s)
PATH="$fake_bin:$PATH" GPU_CHECK_SEARCH_ROOTS="$tmp/none" GPU_CHECK_PHASE_A_S=12 \
  GPU_CHECK_PHASE_S_S=0 GPU_CHECK_PHASE_B_S=6 GPU_CHECK_TOTAL_S=14 GPU_CHECK_CASE_S=30 \
  "$repo/tools/gpu_check.sh" "$build" "$out" >"$tmp/stdout" 2>&1
status=$?
seconds=$(($(date +%s) - start))
[ "$status" -eq 1 ] || fail "exit status $status with a spent budget"
[ "$seconds" -le 25 ] || fail "took ${seconds}s; the check allows 14"
grep -q 'cuda hanging case (TIMEOUT' "$summary" || fail "the hanging case did not end at the budget"
grep -q 'train_yolov5s_640  *NOT RUN' "$summary" || fail "a step started after the budget was spent"
grep -q 'B  amp_gpu  *NOT RUN' "$summary" || fail "a phase B step started past the check's total"
[ "$(grep -c '^gate ' "$summary")" -eq 3 ] || fail "the gates did not end a check cut short"
# GPU_CHECK_ONLY=gates: the gates' steps alone, each with its row; no other step starts.
rm -rf "$out"
PATH="$fake_bin:$PATH" GPU_CHECK_SEARCH_ROOTS="$tmp/none" GPU_CHECK_ONLY=gates \
  GPU_CHECK_PHASE_A_S=8 GPU_CHECK_PHASE_S_S=6 GPU_CHECK_PHASE_B_S=10 GPU_CHECK_CASE_S=2 \
  "$repo/tools/gpu_check.sh" "$build" "$out" >"$tmp/stdout" 2>&1
for step in cuda_tests channels_last_gpu amp_gpu nccl_world1 cuda_graph_gpu cuda_graph_nccl_gpu \
            amp_grads_gpu_vs_cpu; do
  grep -qE "^[ASB]  $step +(FAIL|TIMEOUT|NOT RUN)" "$summary" || fail "gates: no row for $step"
done
for step in train_yolov5s_640 bench_gpu_train two_ranks_one_gpu main_job_gpu selftest; do
  grep -qE "^[ASB]  $step " "$summary" && fail "gates: $step ran"
done
[ "$(grep -c '^gate ' "$summary")" -eq 3 ] || fail "gates: the gate lines are missing"
echo "gpu_check fake: all steps passed ($seconds s)"
