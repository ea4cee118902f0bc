#!/usr/bin/env bash
# tests/shell/stall_watch.sh BAREYOLO MODEL_YAML — a rank that stops making progress is found
# within --stall-timeout plus a few seconds, whatever --timeout is (3 hours here, the default):
#   1. under bareyolo's launcher, a SIGSTOPped rank is named, SIGKILLed (a stopped process
#      cannot take SIGTERM) and the job ends with its last checkpoint intact;
#   2. a rank stopped for less than the limit and continued is not touched: the run finishes;
#   3. two hand-launched ranks (as under torchrun): rank 0 watches the heartbeats in the store,
#      names the stopped rank 1 and ends the job.
set -euo pipefail
bareyolo=$(realpath "$1") cfg=$(realpath "$2")
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
fail() { echo "stall watch: $*" >&2; exit 1; }

"$bareyolo" make-shapes --out "$work/shapes" --n-train 16 --n-val 4 --imgsz 64 --classes 2 > /dev/null
common=(--data "$work/shapes/data.yaml" --cfg "$cfg" --imgsz 64 --batch 4 --workers 1
        --project "$work/runs")

# The worker of local rank 1: the launcher forks its workers in rank order (their environment
# is set after fork(), so /proc/PID/environ cannot tell them apart).
rank1_pid() { pgrep -P "$1" | sort -n | tail -n 1; }
wait_for_checkpoint() {  # the first epoch's end: training runs
  for _ in $(seq 600); do test -s "$1" && return; sleep 0.1; done
  fail "no checkpoint at $1"
}
# Waits for our child $1 to exit, at most $2 seconds; sets $status to its exit status.
wait_exit() {
  for _ in $(seq $(( $2 * 10 ))); do
    if ! kill -0 "$1" 2>/dev/null; then status=0; wait "$1" || status=$?; return; fi
    sleep 0.1
  done
  fail "pid $1 still running $2 s later"
}

# 1. under the launcher.
"$bareyolo" train "${common[@]}" --epochs 5000 --device cpu --nproc-per-node 2 --name stopped \
  --stall-timeout 4 > "$work/stopped.txt" 2>&1 &
launcher=$!
wait_for_checkpoint "$work/runs/stopped/weights/last.safetensors"
kill -STOP "$(rank1_pid $launcher)"
stopped_at=$(date +%s%N)
wait_exit $launcher 20
seconds=$(( ($(date +%s%N) - stopped_at) / 1000000000 ))
test "$status" != 0 || fail "the launcher exited 0 after a stall"
grep -q "\[launcher\]: rank 1 stalled: no progress for [4-9] s and no heartbeat either (the process is stopped or hung); its last collective: .*: sending it SIGKILL (--stall-timeout 4 s)" "$work/stopped.txt" \
  || fail "no stall message: $(grep launcher "$work/stopped.txt")"
grep -q "is intact: continue with --resume" "$work/stopped.txt" || fail "no resume advice"
test "$seconds" -le 12 || fail "the stall took $seconds s to end the job (limit 4 s)"
echo "stall watch: launcher: a stopped rank ended the job $seconds s after SIGSTOP (--stall-timeout 4)"

# 2. stopped for 2 s, continued: untouched.
"$bareyolo" train "${common[@]}" --epochs 40 --device cpu --nproc-per-node 2 --name paused \
  --stall-timeout 6 > "$work/paused.txt" 2>&1 &
launcher=$!
wait_for_checkpoint "$work/runs/paused/weights/last.safetensors"
rank1=$(rank1_pid $launcher)
kill -STOP "$rank1"; sleep 2; kill -CONT "$rank1"
wait_exit $launcher 90
test "$status" = 0 || fail "a rank paused for 2 s of 6 failed the run: $(tail -n 5 "$work/paused.txt")"
! grep -q "stalled" "$work/paused.txt" || fail "a paused rank was called stalled"

# 3. hand-launched ranks: rank 0 watches the store.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
hand=(env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 BAREYOLO_STORE_TOKEN=stall-test-$port)
for rank in 0 1; do
  "${hand[@]}" RANK=$rank LOCAL_RANK=$rank "$bareyolo" train "${common[@]}" --epochs 5000 \
    --name hand --stall-timeout 4 > "$work/hand$rank.txt" 2>&1 &
  eval "hand$rank=\$!"
done
wait_for_checkpoint "$work/runs/hand/weights/last.safetensors"
kill -STOP "$hand1"
stopped_at=$(date +%s%N)
wait_exit "$hand0" 20
seconds=$(( ($(date +%s%N) - stopped_at) / 1000000000 ))
kill -9 "$hand1"
test "$status" != 0 || fail "rank 0 exited 0 after rank 1 stalled"
grep -q "error: rank 1 stalled: no progress for [4-9] s and no heartbeat either .*: ending the job (rank 0 exits; --stall-timeout 4 s)" "$work/hand0.txt" \
  || fail "rank 0 did not name rank 1: $(tail -n 5 "$work/hand0.txt")"
test "$seconds" -le 12 || fail "rank 0 took $seconds s to end the job (limit 4 s)"
echo "stall watch: hand-launched: rank 0 ended the job $seconds s after SIGSTOP (--stall-timeout 4)"
echo "stall watch: all steps passed"
