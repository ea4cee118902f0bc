#!/usr/bin/env bash
# tools/gpu_check.sh — every CUDA path of bareyolo, checked on a machine with a GPU, in three
# timed phases that fit 10 minutes of device time together:
#
#   tools/gpu_check.sh BUILD_DIR OUTDIR
#
# BUILD_DIR holds the binaries (bareyolo, cuda_tests, bench_gpu_kernels, bench_gpu_convolutions,
# bench_gpu_train), built for the GPU elsewhere: a build tree, or the folder
# tools/stage_gpu_check.sh stages (bin/ with models/ and bench/*.py beside it). Nothing is
# compiled here.
# GPU_CHECK_ONLY=gates runs the environment and the steps the gates at the end need, alone: a
# first run's quickest verdict, which leaves device time for a rerun (the whole check takes
# close to 10 minutes of the 15 a session is lent, start-up included).
# GPU_CHECK_ONLY="STEP ..." runs the environment and the named steps alone (the names of the
# summary's rows and of phase_b_steps: a second run of what failed, in less device time).
#
# Phase A (GPU_CHECK_PHASE_A_S, 150 s): the environment (driver, the CUDA libraries actually
#   loaded and their versions, one copy of each), every CUDA test case in its own process (a
#   sticky CUDA error fails one case, not the rest; the NCCL cases last), the first failing
#   case again under compute-sanitizer.
# Phase S, speed (GPU_CHECK_PHASE_S_S, 180 s): `bareyolo train --device 0` of yolov5s at 640
#   batch 64 for 25 steps, yolov5s again in channels last under --amp (channels_last_gpu;
#   channels_last_cudnn: its cuDNN choices' layout and math), the cuDNN algorithms timed once
#   and read back from their cache file (cudnn_choices_gpu), then bench_gpu_kernels,
#   bench_gpu_convolutions and bench_gpu_train (the PyTorch peer's eager modes, when
#   tools/stage_gpu_check.sh staged YOLOv5 beside the binaries). The steps a gate needs come
#   first: the benches' caps add up to more than the phase, and what they leave unrun is
#   figures, not a decision.
# Phase B (GPU_CHECK_PHASE_B_S, 240 s): two ranks sharing the GPU over the
#   TCP ring, the same with --amp and bf16 gradient buckets, a real NCCL communicator at world
#   1 through the trainer, a resume from a GPU checkpoint, the training forward and backward
#   (grads, and grads --amp), the main job for 30 epochs, val and predict of its weights on the
#   GPU against the CPU, sharded validation, an elastic restart, the desync check and the stall
#   watch (DDP 3), `bareyolo selftest`, and GPU speed 4's: the main job's steps recorded as CUDA
#   graphs against launched one by one (the same weights; again over NCCL at world 1,
#   cuda_graph_nccl_gpu), bench_gpu_train's small job (yolov5n at 320 px, batch 16). Later
#   issues add their cases as steps of phase S (speed) or B (see phase_s_steps, phase_b_steps).
#
# Every step has a time limit (its own, and what is left of its phase); the phases together stop
# within GPU_CHECK_TOTAL_S (570 s: a device command may run 600, and a run cut off there would
# lose the summary's gates): a phase gets its budget or what is left of that total, the lesser
# (time a phase leaves unused is not carried over). A step's row is appended to
# OUTDIR/summary.log as soon as it ends. The script never reports a GPU check as passed that did
# not run: a driver error or a missing GPU is a failure, never *skipped*.
# At most 8 files land in OUTDIR (summary, environment, cuda_tests, sanitizer, phase_s and
# phase_b logs); scratch data goes to a temporary folder, and so do the cuDNN algorithms the
# runs time (BAREYOLO_CACHE_DIR: every check times afresh). The summary ends with the gates:
# each default that waits for a GPU run, ready once every step it needs passed. Exit status: 0
# when every step passed, 1 otherwise.
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: tools/gpu_check.sh BUILD_DIR OUTDIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd) || exit 2
out=$2
mkdir -p "$out" && out=$(cd "$out" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
trap 'rm -rf "$work"' EXIT
phase_a_s=${GPU_CHECK_PHASE_A_S:-150}
phase_s_s=${GPU_CHECK_PHASE_S_S:-180}
phase_b_s=${GPU_CHECK_PHASE_B_S:-240}
check_deadline=$(($(date +%s) + ${GPU_CHECK_TOTAL_S:-570}))  # the phases' end, whatever their sum
case_s=${GPU_CHECK_CASE_S:-60}  # one CUDA test case
export BAREYOLO_REQUIRE_GPU=1   # no binary may call a missing GPU "skipped"
export BAREYOLO_CACHE_DIR=$work/cache
summary=$out/summary.log
failed=0

# ---- steps, limits and the summary ---------------------------------------------------
phase=""
phase_deadline=0
start_phase() {
  phase=$1
  local seconds=$2 left=$((check_deadline - $(date +%s)))
  [ "$left" -lt "$seconds" ] && seconds=$((left > 0 ? left : 0))
  phase_deadline=$(($(date +%s) + seconds))
  echo "== phase $phase: at most $seconds s" | tee -a "$summary"
}
# The seconds a step may run: its own cap, or what is left of the phase (0 when less than 5 s
# are left: the step is not started).
limit_for() {
  local left=$((phase_deadline - $(date +%s)))
  [ "$left" -lt 5 ] && left=0
  echo $(($1 < left ? $1 : left))
}
declare -A step_results  # each step's result, for the gates
row() {  # STEP RESULT SECONDS DETAIL...
  local step=$1 result=$2 seconds=$3
  shift 3
  printf '%-2s %-24s %-8s %5ss  %s\n' "$phase" "$step" "$result" "$seconds" "$*" | tee -a "$summary"
  step_results[$step]=$result
  [ "$result" = ok ] || [ "$result" = WARN ] || failed=1
}
# gate NAME SWITCH STEP...: a default that waits for a GPU run may change once every one of its
# steps passed (ok; WARN is not enough). It is opened by hand, with the run's figures: SWITCH in
# models/train/gated_defaults.h.
gate() {
  local name=$1 switch=$2 step verdict=ready detail=""
  shift 2
  for step in "$@"; do
    detail+=" $step=${step_results[$step]:-not-run}"
    [ "${step_results[$step]:-}" = ok ] || verdict="not yet"
  done
  [ "$verdict" = ready ] && detail+="; open it: $switch = true in models/train/gated_defaults.h"
  printf 'gate  %-40s %-8s%s\n' "$name" "$verdict" "$detail" | tee -a "$summary"
}
# run LOG CAP COMMAND...: the command under its limit, its output appended to LOG; sets $rc
# (124: killed at the limit; 125: not run, the phase's time is spent) and $elapsed.
run() {
  local log=$1 cap=$2
  shift 2
  local limit
  limit=$(limit_for "$cap")
  elapsed=0
  if [ "$limit" -le 0 ]; then
    rc=125
    return
  fi
  local start=$(date +%s)
  echo "---- $* (limit ${limit}s)" >>"$log"
  timeout --kill-after=5 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  [ "$rc" -eq 137 ] && rc=124
  elapsed=$(($(date +%s) - start))
}
outcome() {  # what $rc says, for a row
  case $rc in
    0) echo ok ;;
    124) echo TIMEOUT ;;
    125) echo "NOT RUN" ;;
    *) echo FAIL ;;
  esac
}

# ---- A1: environment ------------------------------------------------------------------
# One folder per library: the first wheel folder that has it (site-packages/nvidia/*/lib),
# else the first other one. Two folders holding one library on LD_LIBRARY_PATH can mix
# versions (cuDNN's sub-libraries are opened through the path: SUBLIBRARY_VERSION_MISMATCH).
search_roots=()  # where wheels and libraries may be (GPU_CHECK_SEARCH_ROOTS overrides)
for root in ${GPU_CHECK_SEARCH_ROOTS:-/opt /usr/local/lib /usr/lib /root/.local/lib \
            ${HOME:-/root}/.local/lib /usr/local/cuda/lib /usr/local/cuda/lib64}; do
  [ -d "$root" ] && search_roots+=("$root")
done
find_library_folders() {
  local roots=("${search_roots[@]}")
  [ ${#roots[@]} -gt 0 ] || return 0
  local library hits wheel
  for library in libcudnn.so.9 libnccl.so.2 libcublas.so.13 libcublasLt.so.13; do
    hits=$(find "${roots[@]}" -maxdepth 10 -name "$library" 2>/dev/null)
    wheel=$(grep -m1 -E 'site-packages|dist-packages' <<<"$hits")
    hits=${wheel:-$(head -n 1 <<<"$hits")}
    [ -n "$hits" ] && dirname "$hits"
  done | awk '!seen[$0]++'
}

environment() {
  local log=$out/environment.log start=$(date +%s) problems="" warnings=""
  {
    echo "date: $(date -u)"
    echo "host: $(uname -a)"
    echo "build: $build"
    ldd --version 2>&1 | head -n 1
  } >"$log"
  local folders
  mapfile -t folders < <(find_library_folders)
  local folder added=()  # a folder already on the path is not added twice
  for folder in "${folders[@]}"; do
    [[ ":${LD_LIBRARY_PATH:-}:" == *":$folder:"* ]] || added+=("$folder")
  done
  if [ ${#added[@]} -gt 0 ]; then
    export LD_LIBRARY_PATH="$(IFS=:; echo "${added[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  # The Python of the PyTorch peers: the one whose site-packages holds torch.
  local torch_init=""
  [ ${#search_roots[@]} -gt 0 ] &&
    torch_init=$(find "${search_roots[@]}" -maxdepth 9 -path '*-packages/torch/__init__.py' \
                 2>/dev/null | head -n 1)
  if [ -n "$torch_init" ]; then
    local python_bin
    python_bin=$(cd "$(dirname "$torch_init")/../../../../bin" 2>/dev/null && pwd)
    [ -n "$python_bin" ] && export PATH="$python_bin:$PATH"
  fi
  # YOLOv5 for bench_gpu_train's PyTorch peer, where tools/stage_gpu_check.sh staged it.
  [ -f "$build/../peer/yolov5/__init__.py" ] && export YOLOV5_DIR=$(cd "$build/../peer/yolov5" && pwd)
  {
    echo "library folders: ${folders[*]:-(none found)}"
    echo "YOLOV5_DIR=${YOLOV5_DIR:-(unset: the PyTorch peer needs the yolov5 package)}"
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    echo "python3: $(command -v python3) (torch at ${torch_init:-none})"
    echo "-- driver libraries (dlopened; ldd cannot see them)"
    ldconfig -p 2>/dev/null | grep -E 'libcuda\.so\.1|libnvidia-ml\.so\.1' || echo "(not in ldconfig)"
    echo "-- nvidia-smi"
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1
    echo "-- wheels"
    python3 -m pip show nvidia-cudnn-cu13 nvidia-nccl-cu13 nvidia-cublas torch 2>/dev/null |
      grep -E '^(Name|Version|Location):'
  } >>"$log" 2>&1
  # Exactly one copy of each library on the search path.
  local dir library
  for library in libcudnn.so.9 libnccl.so.2 libcublas.so.13 libcublasLt.so.13; do
    local copies=0
    IFS=: read -ra dirs <<<"${LD_LIBRARY_PATH:-}"
    for dir in "${dirs[@]}"; do [ -e "$dir/$library" ] && copies=$((copies + 1)); done
    [ "$copies" -gt 1 ] && problems+="$library in $copies folders of LD_LIBRARY_PATH; "
  done
  local binary
  for binary in bareyolo cuda_tests bench_gpu_kernels bench_gpu_convolutions bench_gpu_train; do
    if [ ! -x "$build/$binary" ]; then
      problems+="$binary missing from $build; "
      continue
    fi
    echo "-- ldd $binary" >>"$log"
    ldd "$build/$binary" >>"$log" 2>&1
    local unresolved
    unresolved=$(ldd "$build/$binary" 2>&1 | grep 'not found' | awk '{print $1}' | tr '\n' ' ')
    [ -n "$unresolved" ] && problems+="$binary cannot load $unresolved; "
  done
  # The versions actually loaded, and the device (a driver error fails here).
  echo "-- bareyolo devices" >>"$log"
  if ! "$build/bareyolo" devices >>"$log" 2>&1; then
    problems+="bareyolo devices failed (see environment.log); "
  fi
  grep -q '^cuda:0' "$log" || problems+="no usable GPU: $(grep -m1 -i 'no usable\|cuda:' "$log"); "
  warnings=$(grep -i 'warning' "$log" | grep -v '^--' | head -n 3 | tr '\n' ' ')
  if [ -n "$problems" ]; then
    row environment FAIL $(($(date +%s) - start)) "$problems"
  elif [ -n "$warnings" ]; then
    row environment WARN $(($(date +%s) - start)) "$warnings"
  else
    row environment ok $(($(date +%s) - start)) "$(grep -m1 '^cuda:0' "$log")"
  fi
}

# ---- A2: every CUDA test case in its own process ---------------------------------------
first_failing_case=""
cuda_tests() {
  local log=$out/cuda_tests.log start=$(date +%s) names=() passed=0 failures=()
  : >"$log"
  mapfile -t names < <("$build/cuda_tests" --list-test-cases 2>>"$log" |
                       grep -v '^\[doctest\]\|^====' | sed '/^$/d')
  if [ ${#names[@]} -eq 0 ]; then
    row cuda_tests FAIL $(($(date +%s) - start)) "cuda_tests lists no test case"
    return
  fi
  # NCCL last: its abort case tears a communicator down mid-bootstrap.
  mapfile -t names < <(printf '%s\n' "${names[@]}" | grep -vi nccl; printf '%s\n' "${names[@]}" | grep -i nccl)
  local name
  for name in "${names[@]}"; do
    run "$log" "$case_s" "$build/cuda_tests" "--test-case=${name//,/\\,}"
    case $rc in
      0) passed=$((passed + 1)) ;;
      *) failures+=("$name ($(outcome), exit $rc)")
         [ -z "$first_failing_case" ] && first_failing_case=$name ;;
    esac
    [ "$rc" -eq 125 ] && break
  done
  local total=${#names[@]}
  if [ ${#failures[@]} -eq 0 ]; then
    row cuda_tests ok $(($(date +%s) - start)) "$passed of $total cases passed"
  else
    local named
    named=$(printf '%s; ' "${failures[@]:0:8}")
    [ ${#failures[@]} -gt 8 ] && named+="and $((${#failures[@]} - 8)) more (cuda_tests.log)"
    row cuda_tests FAIL $(($(date +%s) - start)) "$passed of $total passed; failed: $named"
  fi
}

sanitizer() {
  local log=$out/sanitizer.log
  : >"$log"
  if [ -z "$first_failing_case" ]; then
    row sanitizer ok 0 "no failing case to rerun"
    return
  fi
  local tool
  tool=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
  if [ -z "$tool" ]; then
    echo "compute-sanitizer is not on this machine: '$first_failing_case' not rerun" >"$log"
    row sanitizer WARN 0 "compute-sanitizer absent (recorded, not a failure)"
    return
  fi
  run "$log" 60 "$tool" --tool memcheck "$build/cuda_tests" "--test-case=${first_failing_case//,/\\,}"
  row sanitizer WARN "$elapsed" "'$first_failing_case' rerun under memcheck (exit $rc): $(grep -m1 'ERROR SUMMARY' "$log")"
}

# ---- phase S: real training on the GPU, and its speed ------------------------------------
phase_s_log=$out/phase_s.log
# Peak GPU memory of the run, sampled by nvidia-smi twice a second into $work/memory.
sample_memory() {
  while true; do
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null >>"$work/memory"
    sleep 0.5
  done
}

# The shapes data the training steps share: 128 training and 16 validation images of 320 px.
make_shapes() {
  [ -f "$work/shapes/data.yaml" ] && { rc=0; return; }
  run "$1" 60 "$build/bareyolo" make-shapes --out "$work/shapes" --n-train 128 --n-val 16 --imgsz 320
}

train_yolov5s_640() { train_640 train_yolov5s_640 120 25; }
# --channels-last on --amp: the speed target's configuration (NHWC bf16 activations, every op of
# the step on its own channels-last kernel, docs/gpu.md); its steady ms/step beside
# train_yolov5s_640's (float NCHW). Its cuDNN choices are logged (its keys are new to the check's
# cache: bf16, NHWC), and row channels_last_cudnn counts how many ran NHWC on the tensor cores.
channels_last_gpu() {
  local from=$(($(cat "$phase_s_log" 2>/dev/null | wc -l) + 1))
  BAREYOLO_CUDNN_LOG=1 train_640 channels_last_gpu 90 15 --channels-last on --amp
  local lines choices nhwc tensor_op verdict=ok
  lines=$(tail -n +"$from" "$phase_s_log" | sed 's/^\[rank[0-9]*\]: //' | grep '^cudnn ')
  choices=$(printf '%s\n' "$lines" | grep -c '^cudnn ')
  nhwc=$(printf '%s\n' "$lines" | grep -c '^cudnn [a-z-]* bf16 nhwc ')
  tensor_op=$(printf '%s\n' "$lines" | grep -c ' tensor-op; ')
  # Every choice NHWC, and no op ran on copies of its views (the Solver's note after the first
  # step), or the step converts somewhere; the math is reported, not judged (cuDNN may rank FMA
  # or default math first for the stem's 3 channels).
  local copies
  copies=$(tail -n +"$from" "$phase_s_log" | grep -o 'the first step copied [0-9]* views' | head -n 1)
  [ "$choices" -gt 0 ] && [ "$nhwc" -eq "$choices" ] && [ -z "$copies" ] || verdict=WARN
  row channels_last_cudnn "$verdict" 0 "$choices cuDNN choices: $nhwc bf16 NHWC, $tensor_op" \
    "tensor-op; ${copies:-no view copied for an op}"
}

train_640() {  # ROW CAP MAX_STEPS ARGS...: yolov5s at 640 px, batch 64, without validation
  local name=$1 cap=$2 steps=$3 log=$phase_s_log start=$(date +%s)
  shift 3
  make_shapes "$log"
  if [ "$rc" -ne 0 ]; then
    row "$name" "$(outcome)" "$elapsed" "make-shapes failed (phase_s.log)"
    return
  fi
  : >"$work/memory"
  sample_memory &
  local sampler=$!
  run "$log" "$cap" "$build/bareyolo" train --data "$work/shapes/data.yaml" --cfg models/yolov5s.yaml \
    --device 0 --batch 64 --imgsz 640 --epochs 100 --max-steps "$steps" --no-val \
    --project "$work/runs" --name "$name" "$@"
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  local peak
  peak=$(sort -n "$work/memory" | tail -n 1)
  if [ "$rc" -ne 0 ]; then
    row "$name" "$(outcome)" $(($(date +%s) - start)) "exit $rc: $(grep -m1 -i 'error' "$log")"
    return
  fi
  # results.jsonl: one row per epoch (2 batches each): losses and the mean step.
  local verdict
  verdict=$(python3 - "$work/runs/$name/results.jsonl" <<'EOF'
import json, math, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
loss = [r["train/box_loss"] + r["train/obj_loss"] + r["train/cls_loss"] for r in rows]
steps = [r["step_seconds"] for r in rows]
steady = statistics.median(steps[1:]) if len(steps) > 1 else float("nan")
first = rows[0]["train_seconds"] - steady * (round(rows[0]["train_seconds"] / rows[0]["step_seconds"]) - 1)
ok = all(map(math.isfinite, loss)) and loss[-1] < loss[0]
print(("ok" if ok else "FAIL"),
      f"loss {loss[0]:.4f} -> {loss[-1]:.4f} over {len(rows)} epochs; step 1 ~{first:.1f} s;",
      f"steady {steady * 1000:.0f} ms/step ({64 / steady:.0f} img/s)")
EOF
)
  row "$name" "${verdict%% *}" $(($(date +%s) - start)) "${verdict#* }; peak GPU memory ${peak:-?} MiB"
}

bench_gpu_kernels() { bench bench_gpu_kernels 30; }
bench_gpu_convolutions() { bench bench_gpu_convolutions 45; }
bench_gpu_train() {
  bench bench_gpu_train 150 --warmup 3 --steps 10 --rounds 1 --no-compile --peer-limit 30
}

bench() {  # NAME CAP ARGS...: a bench's RESULT line in the summary
  bench_as "$1" "$@"
}
bench_as() {  # ROW NAME CAP ARGS...: bench NAME's RESULT line in the summary, as row ROW
  local label=$1 name=$2 cap=$3
  shift 3
  local mark log=$phase_s_log
  [ "$phase" = B ] && log=$phase_b_log
  mark=$(wc -l <"$log")
  run "$log" "$cap" "$build/$name" "$@"
  local result
  result=$(tail -n +"$((mark + 1))" "$log" | grep '^RESULT ' | tail -n 1)
  # for the steps that check its figures (a bench cut short at its limit may have printed a
  # RESULT of what it measured before: kept, its row still says how the run ended)
  [ -n "$result" ] && echo "$result" >"$work/$label.result"
  if [ "$rc" -eq 0 ] && [ -n "$result" ]; then
    row "$label" ok "$elapsed" "$result"
  elif [ -n "$result" ]; then
    row "$label" "$(outcome)" "$elapsed" "exit $rc; its last RESULT before: $result"
  else  # a bench that ends without its RESULT line measured nothing
    row "$label" "$([ "$rc" -eq 0 ] && echo FAIL || outcome)" "$elapsed" \
      "exit $rc, no RESULT: $(tail -n +"$((mark + 1))" "$log" | tail -n 1)"
  fi
}

# cuDNN's algorithms timed once and remembered (GPU speed 2): the main job for about 2 epochs
# (24 optimizer steps) under --amp, twice, with an algorithm cache of its own. The first run
# times every convolution it meets (BAREYOLO_CUDNN_LOG=1 prints each choice: how many run on the
# tensor cores) and saves them; the second reads them ("N choices from FILE") and times none;
# both end with the same bits (the same deterministic algorithms) in every tensor of
# last.safetensors (stopped by --max-steps, a run keeps its whole fp32 checkpoint there, where a
# finished one strips it to fp16 EMA weights that could hide a difference). Each run's
# first-epoch train seconds show what the timing cost.
cudnn_choices_gpu() {
  local start=$(date +%s) run
  mkdir -p "$work/choices"
  for run in 1 2; do
    run "$work/choices/run$run.log" 60 env BAREYOLO_CACHE_DIR="$work/choices/cache" \
      BAREYOLO_CUDNN_LOG=1 bash -c "cd '$work/choices' && exec '$build/bareyolo' train \
      --device 0 --amp --epochs 100 --max-steps 24 --project runs --name run$run --exist-ok"
    cat "$work/choices/run$run.log" >>"$phase_s_log"
    [ "$rc" -eq 0 ] || { row cudnn_choices_gpu "$(outcome)" $(($(date +%s) - start)) "run $run: exit $rc"; return; }
  done
  local bits verdict
  bits=$(compare same-bits "$work/choices/runs/run1/weights/last.safetensors" \
         "$work/choices/runs/run2/weights/last.safetensors")
  verdict=$(python3 - "$work/choices" "$bits" 2>&1 <<'EOF'
import json, re, sys
folder, bits = sys.argv[1:]
logs = [[re.sub(r"^\[rank\d+\]: ", "", line)
         for line in open(f"{folder}/run{r}.log").read().splitlines()] for r in (1, 2)]
timed = [[line for line in log if line.startswith("cudnn ")] for log in logs]
tensor_op = sum(" tensor-op; " in line for line in timed[0])
saved = any("cuDNN algorithms:" in line and " saved to " in line for line in logs[0])
read = [line.split("note: ")[-1] for line in logs[1] if " choices from " in line]
first = [json.loads(open(f"{folder}/runs/run{r}/results.jsonl").readline())["train_seconds"]
         for r in (1, 2)]
ok = timed[0] and saved and read and not timed[1] and bits.startswith("ok")
print("ok" if ok else "FAIL",
      f"run 1 timed {len(timed[0])} ({tensor_op} tensor-op), saved: {saved}; run 2: "
      f"{read[0] if read else 'read nothing'}, timed {len(timed[1])}; {bits.split(': ', 1)[-1]};",
      f"first epoch train s {first[0]:.2f} / {first[1]:.2f}")
EOF
)
  row cudnn_choices_gpu "${verdict%% *}" $(($(date +%s) - start)) "${verdict#* }"
}

# ---- phase B: multi-rank, NCCL, resume, GPU against CPU ----------------------------------
# compare ARGS...: tools/compare_outputs.py's last line ("ok: ..." or "FAIL: ...").
compare() { python3 "$repo/tools/compare_outputs.py" "$@" 2>&1 | tail -n 1; }

phase_b_log=$out/phase_b.log
train_small() {  # NAME EPOCHS ARGS...: yolov5n at 320 on the shapes data
  local name=$1 epochs=$2
  shift 2
  run "$phase_b_log" 90 "$build/bareyolo" train --data "$work/shapes/data.yaml" \
    --cfg models/yolov5n.yaml --batch 16 --imgsz 320 --epochs "$epochs" --no-val \
    --project "$work/runs" --name "$name" --exist-ok "$@"
}

two_ranks_one_gpu() {
  local start=$(date +%s)
  train_small shared 100 --device 0,0 --max-steps 8
  local used
  used=$(grep -m1 'communicator:' "$phase_b_log" | sed 's/.*communicator: //')
  if [ "$rc" -eq 0 ] && [[ $used == "tcp, 2 rank(s)" ]]; then
    row two_ranks_one_gpu ok $(($(date +%s) - start)) "2 ranks on cuda:0 over the TCP ring, 8 steps"
  else
    row two_ranks_one_gpu "$( [ "$rc" -eq 0 ] && echo FAIL || outcome)" $(($(date +%s) - start)) \
      "exit $rc; communicator '${used:-none logged}'"
  fi
}

# --amp (bf16 activations through the graph: the bf16 kernels and cuDNN's bf16 convolutions)
# with bf16 gradient buckets staged through the TCP ring: 8 batches on 2 ranks sharing cuda:0,
# finite losses (1 epoch: its row in results.jsonl).
amp_gpu() {
  local start=$(date +%s)
  train_small amp 1 --device 0,0 --amp --grad-dtype bf16
  local verdict
  verdict=$(python3 - "$work/runs/amp/results.jsonl" 2>&1 <<'EOF'
import json, math, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
loss = [r["train/box_loss"] + r["train/obj_loss"] + r["train/cls_loss"] for r in rows]
print(("ok" if rows and all(map(math.isfinite, loss)) else "FAIL"),
      f"2 ranks on cuda:0, --amp --grad-dtype bf16, 1 epoch, loss {loss[-1]:.4f}")
EOF
)
  if [ "$rc" -eq 0 ] && grep -q 'mixed precision (--amp)' "$phase_b_log"; then
    row amp_gpu "${verdict%% *}" $(($(date +%s) - start)) "${verdict#* }"
  else
    row amp_gpu "$( [ "$rc" -eq 0 ] && echo FAIL || outcome)" $(($(date +%s) - start)) "exit $rc"
  fi
}

nccl_world1() {
  local start=$(date +%s) mark
  mark=$(wc -l <"$phase_b_log")
  # 10 steps: past the first epoch's 8 (whose row results.jsonl gets, host_waits_gpu's).
  train_small nccl 100 --device 0 --backend nccl --max-steps 10 --save-steps 3
  local used
  used=$(tail -n +"$mark" "$phase_b_log" | grep -m1 'communicator:' | sed 's/.*communicator: //')
  if [ "$rc" -eq 0 ] && [[ $used == "nccl, 1 rank(s)" ]]; then
    row nccl_world1 ok $(($(date +%s) - start)) "a real NCCL communicator through the trainer, 10 steps"
  else
    row nccl_world1 "$( [ "$rc" -eq 0 ] && echo FAIL || outcome)" $(($(date +%s) - start)) \
      "exit $rc; communicator '${used:-none logged}'"
  fi
}

# A step never waits for the host (docs/gpu.md): results.jsonl's host_waits (per optimizer
# step, the last epoch's) is 0 for the yolov5s run on one GPU and the NCCL run through the
# trainer, and so is bench_gpu_train's ours_host_waits_per_step (the most of its precisions').
# (Two ranks over NCCL need two GPUs; this machine has one.)
host_waits_gpu() {
  local start=$(date +%s) verdict bench_waits
  bench_waits=$(grep -o 'ours_host_waits_per_step=[^ ]*' "$work/bench_gpu_train.result" 2>/dev/null)
  verdict=$(python3 - "${bench_waits#*=}" "$work/runs/train_yolov5s_640/results.jsonl" \
            "$work/runs/nccl/results.jsonl" 2>&1 <<'EOF'
import json, sys
# A bench that printed no RESULT measured nothing: it is named, not judged.
seen = [f"bench_gpu_train {sys.argv[1]}"] if sys.argv[1] else []
for path in sys.argv[2:]:
    try:
        last = [json.loads(line) for line in open(path)][-1]
    except (OSError, IndexError, ValueError) as error:
        print("FAIL", path, "unreadable:", error)
        sys.exit()
    seen.append(f"{path.split('/')[-2]} {last.get('host_waits', 'absent')}")
ok = all(s.split()[1] in ("0", "0.0", "0.00") for s in seen)
print("ok" if ok else "FAIL", "host_waits per optimizer step:", ", ".join(seen)
      + ("" if sys.argv[1] else "; bench_gpu_train: no RESULT, not judged"))
EOF
)
  row host_waits_gpu "${verdict%% *}" $(($(date +%s) - start)) "${verdict#* }"
}

# Resume the NCCL run from its step-3 checkpoint: the same weights after step 10 (across an
# epoch's end) as the run that was not interrupted (cuDNN's algorithms here are deterministic).
resume_gpu_checkpoint() {
  local start=$(date +%s) runs=$work/runs
  if [ ! -f "$runs/nccl/weights/step3.safetensors" ]; then
    row resume_gpu_checkpoint FAIL 0 "no step-3 checkpoint from nccl_world1"
    return
  fi
  cp -r "$runs/nccl" "$runs/resumed"
  run "$phase_b_log" 60 "$build/bareyolo" train --resume "$runs/resumed/weights/step3.safetensors" \
    --device 0 --max-steps 10
  if [ "$rc" -ne 0 ]; then
    row resume_gpu_checkpoint "$(outcome)" "$elapsed" "exit $rc"
    return
  fi
  local compared
  compared=$(compare tensors --rtol 1e-6 "$runs/nccl/weights/last.safetensors" \
             "$runs/resumed/weights/last.safetensors")
  row resume_gpu_checkpoint "${compared%%:*}" $(($(date +%s) - start)) "resumed vs uninterrupted: $compared"
}

# The weights phase B compares the devices with: nccl_world1's, else fresh ones (so that one
# failure does not hide the comparisons behind it).
comparison_weights() {
  local trained=$work/runs/nccl/weights/last.safetensors fresh=$work/fresh.safetensors
  if [ -f "$trained" ]; then
    echo "$trained"
  else
    "$build/bareyolo" init --cfg models/yolov5n.yaml --nc 4 --out "$fresh" >>"$phase_b_log" 2>&1
    echo "$fresh"
  fi
}

# The batch `bareyolo grads` runs on: 2 random images of 320 px with targets.
comparison_batch() {
  [ -f "$work/batch.safetensors" ] ||
    python3 "$repo/tools/compare_outputs.py" make-batch "$work/batch.safetensors" --images 2 \
      --imgsz 320 >>"$phase_b_log" 2>&1
}

# run_grads STEP START WEIGHTS DEVICE PRECISION: the training forward and backward of yolov5n
# (`bareyolo grads`) on the comparison batch into $work/STEP_DEVICE_PRECISION.safetensors
# (PRECISION float, or bf16: --amp); when it fails, STEP's row says so and the status is 1.
run_grads() {
  local step=$1 start=$2 weights=$3 device=$4 precision=$5 amp=()
  [ "$precision" = bf16 ] && amp=(--amp)
  comparison_batch
  run "$phase_b_log" 40 "$build/bareyolo" grads --cfg models/yolov5n.yaml --weights "$weights" \
    --batch "$work/batch.safetensors" --out "$work/${step}_${device}_$precision.safetensors" \
    --device "$device" "${amp[@]}"
  [ "$rc" -eq 0 ] && return 0
  row "$step" "$(outcome)" $(($(date +%s) - start)) "grads ${amp[*]} --device $device: exit $rc"
  return 1
}

# STEP START NAME1 LAST_LINE1 NAME2 LAST_LINE2: STEP's row from two comparisons' last lines,
# ok when both are.
comparisons_row() {
  local result=ok
  [[ $4 == ok* && $6 == ok* ]] || result=FAIL
  row "$1" $result $(($(date +%s) - $2)) "$3: $4 | $5: $6"
}

# In float with TF32 off, the GPU against the CPU: every kernel within a few float ulps of the
# CPU's, so the raw head outputs within 1e-4 and every parameter gradient within 1e-3 per tensor
# (norm-wise).
grads_gpu_vs_cpu() {
  local step=grads_gpu_vs_cpu start=$(date +%s) weights device
  weights=$(comparison_weights)
  for device in cpu 0; do run_grads $step "$start" "$weights" $device float || return; done
  local gpu=$work/${step}_0_float.safetensors cpu=$work/${step}_cpu_float.safetensors
  comparisons_row $step "$start" heads "$(compare tensors --rtol 1e-4 --prefix p "$gpu" "$cpu")" \
    gradients "$(compare tensors --rtol 1e-3 --prefix grad. "$gpu" "$cpu")"
}

# Under --amp (bf16 activations) against the CPU's bf16 definition. The heads within 5% per
# tensor (seen on an H200: at most 2.5%). The gradients are measured by the definition's own
# rounding noise (compare_outputs.py bf16): a weight gradient sums products that cancel, so the
# CPU's bf16 gradients differ from its float ones by 3-80% per tensor; the GPU's differ from
# the CPU's bf16 ones by 0.69 times that over all tensors, at most 1.2 times for one (seen on an
# H200). Allowed: 1 time over all tensors, 3 times for one; a wrong gradient adds its own error.
amp_grads_gpu_vs_cpu() {
  local step=amp_grads_gpu_vs_cpu start=$(date +%s) weights
  weights=$(comparison_weights)
  run_grads $step "$start" "$weights" cpu float || return
  run_grads $step "$start" "$weights" cpu bf16 || return
  run_grads $step "$start" "$weights" 0 bf16 || return
  local prefix=$work/${step}
  comparisons_row $step "$start" \
    heads "$(compare tensors --rtol 5e-2 --prefix p "${prefix}_0_bf16.safetensors" \
             "${prefix}_cpu_bf16.safetensors")" \
    gradients "$(compare bf16 "${prefix}_0_bf16.safetensors" "${prefix}_cpu_bf16.safetensors" \
                 "${prefix}_cpu_float.safetensors")"
}

# The main job on the GPU (`bareyolo train --device 0` with no --data: yolov5n on the built-in
# shapes data at 128 px), GPU_CHECK_MAIN_EPOCHS epochs (30) of its 80, validating every epoch:
# it must learn (best mAP50 above 0.1), and its weights are the trained ones that
# val_predict_gpu_vs_cpu compares the devices with.
main_job_gpu() {
  local start=$(date +%s) epochs=${GPU_CHECK_MAIN_EPOCHS:-30}
  mkdir -p "$work/main"
  run "$phase_b_log" 150 bash -c "cd '$work/main' && exec '$build/bareyolo' train --device 0 \
    --epochs $epochs --project runs --name main --exist-ok"
  local best split
  best=$(grep -o 'best mAP50 [0-9.]*, mAP50-95 [0-9.]*' "$phase_b_log" | tail -n 1)
  # Where an epoch's seconds go (GPU speed 4): the medians over the epochs after the first.
  split=$(python3 - "$work/main/runs/main/results.jsonl" 2>&1 <<'EOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])][1:]
part = lambda key: statistics.median(r[key] for r in rows) if rows else float("nan")
print(f"s/epoch {part('epoch_seconds'):.2f} (train {part('train_seconds'):.2f}, "
      f"val {part('val_seconds'):.2f}, checkpoint {part('checkpoint_seconds'):.2f})")
EOF
)
  if [ "$rc" -eq 0 ] && awk -v m="${best#best mAP50 }" 'BEGIN { exit !(m + 0 > 0.1) }'; then
    row main_job_gpu ok $(($(date +%s) - start)) "$epochs epochs: $best; ${split##*$'\n'}"
  else
    row main_job_gpu "$( [ "$rc" -eq 0 ] && echo FAIL || outcome)" $(($(date +%s) - start)) \
      "exit $rc after $epochs epochs: ${best:-no result}"
  fi
}

# --cuda-graph (GPU speed 4): the main job for about 4 epochs (48 optimizer steps, through
# warm-up) with its steps launched one kernel at a time and recorded and replayed: the same
# weights to the bit (every tensor of last.safetensors: weights, EMA, optimizer; a run stopped by
# --max-steps keeps the whole checkpoint, where a finished one strips it to fp16 EMA weights;
# cuDNN's algorithms are the deterministic ones), and each one's training seconds per epoch (the
# medians after the first epoch).
cuda_graph_gpu() {
  local start=$(date +%s) steps=${GPU_CHECK_GRAPH_STEPS:-48} mode
  mkdir -p "$work/graph"
  for mode in off on; do
    run "$phase_b_log" 40 bash -c "cd '$work/graph' && exec '$build/bareyolo' train --device 0 \
      --epochs 100 --max-steps $steps --cuda-graph $mode --project runs --name $mode --exist-ok"
    [ "$rc" -eq 0 ] || { row cuda_graph_gpu "$(outcome)" $(($(date +%s) - start)) "--cuda-graph $mode: exit $rc"; return; }
  done
  local bits seconds runs=$work/graph/runs
  bits=$(compare same-bits "$runs/off/weights/last.safetensors" "$runs/on/weights/last.safetensors")
  seconds=$(python3 - "$runs" 2>&1 <<'EOF'
import json, statistics, sys
def train_s(mode):
    rows = [json.loads(line) for line in open(f"{sys.argv[1]}/{mode}/results.jsonl")][1:]
    return statistics.median(r["train_seconds"] for r in rows) if rows else float("nan")
print(f"train s/epoch: off {train_s('off'):.3f}, on {train_s('on'):.3f}")
EOF
)
  row cuda_graph_gpu "${bits%%:*}" $(($(date +%s) - start)) "${bits#*: }; ${seconds##*$'\n'}"
}

# The same check through a real NCCL communicator of one rank: --cuda-graph on records the step
# with its collectives (SyncBatchNorm's, the buckets', the loss's) and must leave the launched
# steps' bits.
cuda_graph_nccl_gpu() {
  local start=$(date +%s) mode
  for mode in off on; do
    train_small "graph_nccl_$mode" 100 --device 0 --backend nccl --max-steps 8 --cuda-graph $mode
    [ "$rc" -eq 0 ] || { row cuda_graph_nccl_gpu "$(outcome)" $(($(date +%s) - start)) "--cuda-graph $mode: exit $rc"; return; }
  done
  local bits
  bits=$(compare same-bits "$work/runs/graph_nccl_off/weights/last.safetensors"          "$work/runs/graph_nccl_on/weights/last.safetensors")
  row cuda_graph_nccl_gpu "${bits%%:*}" $(($(date +%s) - start)) "NCCL, 8 steps: ${bits#*: }"
}

# bench_gpu_train's small job (GPU speed 4): yolov5n at 320 px, batch 16, where the host's launch
# overhead shows: ours eager and replayed against PyTorch YOLOv5's eager AMP on the same GPU.
bench_gpu_train_small() {
  bench_as bench_gpu_train_small bench_gpu_train 70 --cfg models/yolov5n.yaml --imgsz 320 \
    --batch 16 --warmup 5 --steps 20 --rounds 2 --no-compile --peer-limit 30
}

# val and predict of the main job's weights on both devices: the metrics within 0.005 and the
# detections (--conf 0.25) equal. Trained weights, because an untrained model's scores are
# nearly equal everywhere: which of two near-tied boxes NMS keeps then follows float noise
# (seen on an H200: the same decoded outputs to 1e-4 of 372 px, 654 of 1143 detections equal).
val_predict_gpu_vs_cpu() {
  local start=$(date +%s) device data=$work/main/datasets/shapes
  local weights=$work/main/runs/main/weights/best.safetensors
  if [ ! -f "$weights" ]; then
    row val_predict_gpu_vs_cpu FAIL 0 "no trained weights (main_job_gpu)"
    return
  fi
  local model=(--cfg models/yolov5n.yaml --weights "$weights" --imgsz 128)
  for device in cpu 0; do
    run "$work/val_$device.log" 40 "$build/bareyolo" val "${model[@]}" --data "$data/data.yaml" \
      --device "$device"
    cat "$work/val_$device.log" >>"$phase_b_log"
    [ "$rc" -eq 0 ] || { row val_predict_gpu_vs_cpu "$(outcome)" "$elapsed" "val --device $device: exit $rc"; return; }
    run "$phase_b_log" 40 "$build/bareyolo" predict "${model[@]}" --conf 0.25 \
      --source "$data/images/val" --out "$work/predict_$device" --device "$device"
    [ "$rc" -eq 0 ] || { row val_predict_gpu_vs_cpu "$(outcome)" "$elapsed" "predict --device $device: exit $rc"; return; }
  done
  comparisons_row val_predict_gpu_vs_cpu "$start" \
    val "$(compare val-metrics --atol 0.005 "$work/val_0.log" "$work/val_cpu.log")" \
    predict "$(compare detections "$work/predict_0/detections.json" \
               "$work/predict_cpu/detections.json")"
}

# Sharded validation on the GPU: 2 ranks sharing cuda:0 (the TCP ring: NCCL wants a GPU per
# rank) each validate half of the batches at the end of a 1-epoch run; rank 0's table must be
# `bareyolo val`'s on the final weights in the same batches (2 x 4 images per rank), to the
# 3 decimals val prints.
sharded_val_gpu() {
  local start=$(date +%s) mark metrics
  mark=$(wc -l <"$phase_b_log")
  run "$phase_b_log" 90 "$build/bareyolo" train --data "$work/shapes/data.yaml" \
    --cfg models/yolov5n.yaml --batch 8 --imgsz 320 --epochs 1 --device 0,0 \
    --project "$work/runs" --name sharded --exist-ok
  [ "$rc" -eq 0 ] || { row sharded_val_gpu "$(outcome)" "$elapsed" "train: exit $rc"; return; }
  tail -n +"$((mark + 1))" "$phase_b_log" | sed 's/^\[rank0\]: //' >"$work/sharded_train.log"
  run "$work/sharded_val.log" 40 "$build/bareyolo" val --cfg models/yolov5n.yaml \
    --weights "$work/runs/sharded/weights/final.safetensors" --imgsz 320 --batch 8 \
    --data "$work/shapes/data.yaml" --device 0
  cat "$work/sharded_val.log" >>"$phase_b_log"
  [ "$rc" -eq 0 ] || { row sharded_val_gpu "$(outcome)" "$elapsed" "val: exit $rc"; return; }
  metrics=$(compare val-metrics --atol 0.001 "$work/sharded_train.log" "$work/sharded_val.log")
  row sharded_val_gpu "${metrics%%:*}" $(($(date +%s) - start)) "sharded in training vs val: $metrics"
}

# An elastic restart on the GPU: rank 1 of 2 (sharing cuda:0) killed after the step-3
# checkpoint; --max-restarts 1 restarts the job from it and the run ends by itself.
elastic_restart_gpu() {
  local start=$(date +%s) runs=$work/runs launcher
  ( train_small elastic 100 --device 0,0 --max-steps 60 --save-steps 3 --max-restarts 1 ) &
  launcher=$!
  for _ in $(seq 300); do
    [ -s "$runs/elastic/weights/step3.safetensors" ] && break
    kill -0 "$launcher" 2>/dev/null || break  # it ended (or never started)
    sleep 0.1
  done
  pkill -KILL -f -n -- "--name elastic" 2>/dev/null  # the newest: rank 1, forked last
  wait "$launcher"
  local restarted
  restarted=$(grep -m1 'restart 1 of 1 after' "$phase_b_log" | sed 's/^.*restart 1 of 1/restart 1 of 1/')
  if [ -n "$restarted" ] && [ -s "$runs/elastic/weights/last.safetensors" ] &&
     ! grep -q 'training stopped: a worker failed' "$phase_b_log"; then
    row elastic_restart_gpu ok $(($(date +%s) - start)) "$restarted"
  else
    row elastic_restart_gpu FAIL $(($(date +%s) - start)) "no restart after the kill (phase_b.log)"
  fi
}

selftest() {
  run "$phase_b_log" 90 "$build/bareyolo" selftest --device 0
  row selftest "$(outcome)" "$elapsed" "$(grep '^selftest:' "$phase_b_log" | tail -n 1)"
}

# DDP 3's watch on the GPU (docs/ddp.md section 10). The rolling desync check, forced on the
# TCP ring between 2 ranks sharing cuda:0 (NCCL, where it is on by default, needs a GPU per
# rank), must stay silent while the ranks agree; then a SIGSTOPped rank must be named within
# --stall-timeout (5 s) plus a few seconds, and the job end.
desync_check_gpu() {
  local start=$(date +%s)
  export BAREYOLO_DESYNC_CHECK=step
  train_small desync 100 --device 0,0 --max-steps 6
  unset BAREYOLO_DESYNC_CHECK
  if [ "$rc" -eq 0 ] && ! grep -q "out of step" "$phase_b_log"; then
    row desync_check_gpu ok $(($(date +%s) - start)) "BAREYOLO_DESYNC_CHECK=step, 2 ranks on cuda:0, 6 steps"
  else
    row desync_check_gpu "$( [ "$rc" -eq 0 ] && echo FAIL || outcome)" $(($(date +%s) - start)) \
      "exit $rc$(grep -m1 -o 'collectives out of step.*' "$phase_b_log" | cut -c1-120)"
  fi
}

stall_gpu() {
  local start=$(date +%s) log=$work/stall.log cap
  cap=$(limit_for 60)
  if [ "$cap" -le 0 ]; then
    row stall_gpu "NOT RUN" 0 "the phase's time is spent"
    return
  fi
  timeout --kill-after=5 "$cap" "$build/bareyolo" train --data "$work/shapes/data.yaml" \
    --cfg models/yolov5n.yaml --batch 16 --imgsz 320 --epochs 1000 --no-val \
    --project "$work/runs" --name stall --exist-ok --device 0,0 --stall-timeout 5 >"$log" 2>&1 &
  local job=$! rank1="" stopped_at=0
  # Once the first epoch has ended, stop rank 1 (the launcher's younger child).
  while kill -0 "$job" 2>/dev/null && [ ! -s "$work/runs/stall/results.jsonl" ]; do sleep 0.1; done
  if kill -0 "$job" 2>/dev/null; then
    rank1=$(pgrep -P "$(pgrep -P "$job" | head -n 1)" | sort -n | tail -n 1)
    stopped_at=$(date +%s)
    [ -n "$rank1" ] && kill -STOP "$rank1"
  fi
  wait "$job"
  [ -n "$rank1" ] && kill -9 "$rank1" 2>/dev/null
  cat "$log" >>"$phase_b_log"
  local took=$(($(date +%s) - stopped_at))
  if [ -n "$rank1" ] && grep -q "rank 1 stalled: no progress" "$log" && [ "$took" -le 15 ]; then
    row stall_gpu ok $(($(date +%s) - start)) "SIGSTOPped rank 1 named, the job ended ${took} s later (--stall-timeout 5)"
  else
    row stall_gpu FAIL $(($(date +%s) - start)) \
      "$([ -z "$rank1" ] && echo "no epoch ended" || echo "${took} s after SIGSTOP"): $(grep -m1 'error\|launcher\]' "$log" | cut -c1-120)"
  fi
}

# The steps of phases S and B, in order. Later issues add theirs here, each a function that
# ends with one `row`.
# The gates' steps come first in each phase (what a phase's budget leaves unrun is then checks
# no gate waits for, and figures).
phase_s_steps=(channels_last_gpu train_yolov5s_640 cudnn_choices_gpu bench_gpu_kernels
               bench_gpu_convolutions bench_gpu_train)
phase_b_steps=(amp_gpu nccl_world1 cuda_graph_gpu cuda_graph_nccl_gpu amp_grads_gpu_vs_cpu
               two_ranks_one_gpu host_waits_gpu resume_gpu_checkpoint grads_gpu_vs_cpu
               main_job_gpu val_predict_gpu_vs_cpu sharded_val_gpu elastic_restart_gpu
               desync_check_gpu stall_gpu selftest bench_gpu_train_small)

# ---- the run ------------------------------------------------------------------------------
: >"$summary"
echo "gpu_check: $build -> $out"
# The defaults that wait for this run, each "NAME|SWITCH|ROWS" (SWITCH: models/train/gated_defaults.h):
# the rows its gate needs to read ok (the CUDA cases include the channels-last, AMP (the 200-step
# tracking) and NCCL-graph ones; channels_last_gpu's run writes the channels_last_cudnn row).
gates=("--channels-last auto: on for GPUs (#46)|channels_last_on_gpus|cuda_tests channels_last_gpu channels_last_cudnn"
       "--amp: the default on sm80+ (#46)|amp_on_bf16_gpus|cuda_tests amp_gpu amp_grads_gpu_vs_cpu"
       "--cuda-graph auto: NCCL steps too (#48)|cuda_graph_with_nccl|cuda_tests nccl_world1 cuda_graph_gpu cuda_graph_nccl_gpu")
if [ "${GPU_CHECK_ONLY:-}" = gates ]; then
  GPU_CHECK_ONLY=""
  for entry in "${gates[@]}"; do GPU_CHECK_ONLY+=" ${entry##*|}"; done
fi
wanted() { [ -z "${GPU_CHECK_ONLY:-}" ] || [[ " $GPU_CHECK_ONLY " == *" $1 "* ]]; }
start_phase A "$phase_a_s"
environment
wanted cuda_tests && { cuda_tests; sanitizer; }
start_phase S "$phase_s_s"
: >"$phase_s_log"
for step in "${phase_s_steps[@]}"; do wanted "$step" && "$step"; done
start_phase B "$phase_b_s"
: >"$phase_b_log"
make_shapes "$phase_b_log"
for step in "${phase_b_steps[@]}"; do wanted "$step" && "$step"; done
echo "== gates: the defaults a passing run allows to change" | tee -a "$summary"
for entry in "${gates[@]}"; do
  rows=${entry#*|}
  gate "${entry%%|*}" "${rows%%|*}" ${rows#*|}
done
echo "== gpu_check: $([ "$failed" -eq 0 ] && echo 'every step passed' || echo 'FAILED (see the rows above)')" | tee -a "$summary"
exit "$failed"
