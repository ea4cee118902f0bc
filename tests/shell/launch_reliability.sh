#!/usr/bin/env bash
# tests/shell/launch_reliability.sh BAREYOLO MODEL_YAML — how a launch starts and stops:
#   1. WORLD_SIZE=1 from any launcher's variables (RANK/WORLD_SIZE as torchrun sets them,
#      OpenMPI's for `mpirun -np 1`) trains as one process, to the very weights of a plain
#      one-process run (it used to segfault, leaving a run directory);
#   2. SIGTERM to bareyolo's launcher stops the workers, says the launcher was asked to stop
#      (not that a worker failed) and exits with 128 + 15;
#   3. a hand-launched rank whose peers never come gives up at --rendezvous-timeout, naming
#      what it waited for (it used to wait the 3-hour collective timeout);
#   4. two hand-launched ranks with another --imgsz and another model both refuse to start,
#      naming both differences, and no run directory is left.
set -euo pipefail
bareyolo=$(realpath "$1") cfg=$(realpath "$2")
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
fail() { echo "launch reliability: $*" >&2; exit 1; }

"$bareyolo" make-shapes --out "$work/shapes" --n-train 16 --n-val 4 --imgsz 64 --classes 2 > /dev/null
common=(--data "$work/shapes/data.yaml" --cfg "$cfg" --imgsz 64 --batch 4 --workers 1
        --project "$work/runs")

# 1. one rank, from each launcher's variables.
"$bareyolo" train "${common[@]}" --epochs 2 --device cpu --name plain > "$work/plain.txt" 2>&1 \
  || fail "the plain run failed: $(tail -n 5 "$work/plain.txt")"
for launcher in "RANK=0 WORLD_SIZE=1" "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1"; do
  name=${launcher%%=*}
  env $launcher "$bareyolo" train "${common[@]}" --epochs 2 --name "$name" > "$work/$name.txt" 2>&1 \
    || fail "$launcher: exit $?: $(tail -n 5 "$work/$name.txt")"
  grep -q "rank 0 of 1" "$work/$name.txt" || fail "$launcher: no launch line: $(head -n 3 "$work/$name.txt")"
  cmp "$work/runs/plain/weights/final.safetensors" "$work/runs/$name/weights/final.safetensors" \
    || fail "$launcher: the final weights differ from the plain run's"
done

# 2. SIGTERM to the launcher of 2 CPU ranks, once the first epoch has ended.
"$bareyolo" train "${common[@]}" --epochs 500 --device cpu --nproc-per-node 2 --name term \
  > "$work/term.txt" 2>&1 &
launcher=$!
for _ in $(seq 300); do grep -q "epoch 1/500" "$work/term.txt" && break; sleep 0.1; done
grep -q "epoch 1/500" "$work/term.txt" || fail "the 2-rank run did not start: $(tail -n 5 "$work/term.txt")"
kill -TERM "$launcher"
status=0
wait "$launcher" || status=$?
test "$status" = 143 || fail "SIGTERM: exit status $status, not 143: $(tail -n 3 "$work/term.txt")"
grep -q "the launcher was asked to stop by SIGTERM and stopped every worker" "$work/term.txt" \
  || fail "SIGTERM: no message saying so: $(tail -n 3 "$work/term.txt")"
if grep -q "a worker failed" "$work/term.txt"; then fail "SIGTERM was reported as a worker's failure"; fi

# 3. rank 1 of 2 alone: rank 0's store never answers.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
hand=(env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2)
start=$SECONDS
if "${hand[@]}" RANK=1 "$bareyolo" train "${common[@]}" --epochs 1 --name alone \
     --rendezvous-timeout 2 > "$work/alone.txt" 2>&1; then
  fail "a rank without peers trained"
fi
test $((SECONDS - start)) -lt 10 || fail "the lone rank took $((SECONDS - start)) s to give up"
grep -q "rank 1 gave up joining the job after 2 s (the rendezvous timeout, --rendezvous-timeout): still waiting for rank 0's store at 127.0.0.1:$port" \
  "$work/alone.txt" || fail "no rendezvous timeout message: $(tail -n 3 "$work/alone.txt")"

# 4. ranks that disagree: both refuse, naming every difference.
disagree=(--data "$work/shapes/data.yaml" --batch 4 --workers 1 --epochs 1 --project "$work/runs"
          --name disagree --rendezvous-timeout 20)
"${hand[@]}" RANK=0 "$bareyolo" train "${disagree[@]}" --cfg "$cfg" --imgsz 64 \
  > "$work/rank0.txt" 2>&1 &
rank0=$!
status1=0
"${hand[@]}" RANK=1 "$bareyolo" train "${disagree[@]}" --cfg "$(dirname "$cfg")/yolov5n.yaml" \
  --imgsz 96 > "$work/rank1.txt" 2>&1 || status1=$?
status0=0
wait "$rank0" || status0=$?
test "$status0" = 1 -a "$status1" = 1 || fail "disagreeing ranks exited $status0 and $status1, not 1"
for r in 0 1; do
  grep -q "the ranks' configurations differ: rank 1 has --imgsz 96, rank 0 has 64; rank 1 has model yolov5n.yaml (.*), rank 0 has yolov5-tiny.yaml (" \
    "$work/rank$r.txt" || fail "rank $r does not name the differences: $(tail -n 2 "$work/rank$r.txt")"
done
test ! -e "$work/runs/disagree" || fail "disagreeing ranks left a run directory"

echo "launch reliability: all steps passed"
