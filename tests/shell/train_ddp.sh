#!/usr/bin/env bash
# tests/shell/train_ddp.sh BAREYOLO MODEL_YAML — `bareyolo train` on 2 CPU ranks end to end:
#   1. a batch that does not divide over the ranks is refused before anything starts, naming
#      the two nearest valid batches, and leaves no run directory;
#   2. a process marked as a spawned worker is refused when it tries to spawn (recursion guard);
#   3. a worker SIGKILLed mid-run stops the run: the launcher exits non-zero naming the rank
#      and the signal, the last checkpoint stays readable, and --resume finishes the run with
#      final weights byte-identical to an uninterrupted run's; so does a --max-steps stop;
#   3b. with --max-restarts 1 --save-steps 5 the same kill does not end the run: the launcher
#      restarts the job from the newest checkpoint, logs the cause and the step, and the final
#      weights are byte-identical to the uninterrupted run's;
#   4b. a torchrun restart (TORCHELASTIC_RESTART_COUNT=1, same TORCHELASTIC_RUN_ID) after both
#      ranks were killed continues the same run directory from its newest checkpoint, to the
#      same final weights;
#   4. a torchrun-style environment (RANK, WORLD_SIZE, MASTER_*, TORCHELASTIC_RUN_ID set by
#      this script) starts 2 ranks without spawning, and rank 1 writes no file;
#   6. --nnodes 2 --node-rank 0/1 on one machine: global ranks across two launchers;
#   5. where Debian's python3-torch is installed, the real torchrun does the same (torch 1.13
#      spells the flag --no_python; newer releases take --no-python as well; its default
#      --redirects "0" fails on Python 3.11, whose flag enums no longer list the zero member,
#      so the redirects are given per rank).
set -euo pipefail
bareyolo=$(realpath "$1") cfg=$(realpath "$2")
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
fail() { echo "train ddp: $*" >&2; exit 1; }
# A port P with P .. P+N-1 free now: under torchrun bareyolo's store takes MASTER_PORT + 1, which
# an outgoing connection's ephemeral port may hold even when MASTER_PORT is free.
free_ports() {
  python3 -c '
import socket, sys
n = int(sys.argv[1])
while True:
    held = [socket.socket()]
    held[0].bind(("127.0.0.1", 0))
    port = held[0].getsockname()[1]
    try:
        for k in range(1, n):
            held.append(socket.socket())
            held[-1].bind(("127.0.0.1", port + k))
    except (OSError, OverflowError):  # taken, or past 65535
        continue
    print(port)
    break' "$1"
}

"$bareyolo" make-shapes --out "$work/shapes" --n-train 32 --n-val 8 --imgsz 64 --classes 2 > /dev/null
common=(--data "$work/shapes/data.yaml" --cfg "$cfg" --imgsz 64 --batch 8 --workers 1)
cpu2=(--device cpu --nproc-per-node 2)

# 1. divisibility, checked before any worker starts.
if "$bareyolo" train "${common[@]}" --device cpu --nproc-per-node 3 --epochs 1 \
     --project "$work/runs" --name bad > "$work/bad.txt" 2>&1; then
  fail "batch 8 over 3 ranks was accepted"
fi
grep -q "use batch=6 or batch=9" "$work/bad.txt" || fail "no nearest-batch advice: $(cat "$work/bad.txt")"
test ! -e "$work/runs/bad" || fail "a refused run left a run directory"

# 2. the recursion guard.
if BAREYOLO_SPAWNED=1 "$bareyolo" train "${common[@]}" "${cpu2[@]}" --epochs 1 \
     --project "$work/runs" --name nested > "$work/nested.txt" 2>&1; then
  fail "a spawned worker was allowed to spawn"
fi
grep -q "must not spawn workers itself" "$work/nested.txt" || fail "no recursion message: $(cat "$work/nested.txt")"

# 3. uninterrupted, then killed and resumed, then stopped by --max-steps and resumed.
"$bareyolo" train "${common[@]}" "${cpu2[@]}" --epochs 20 --project "$work/runs" --name whole \
  > "$work/whole.txt" 2>&1 || fail "2-rank run failed: $(tail -n 5 "$work/whole.txt")"
grep -q "starting 2 ranks on cpu x2" "$work/whole.txt" || fail "no spawn notice"
grep -q "^\[rank0\]: " "$work/whole.txt" || fail "worker output is not prefixed [rank0]:"
# Rank 0 owns what a person sees: the epoch lines are its alone.
grep -q "^\[rank0\]: epoch 20/20 " "$work/whole.txt" || fail "no epoch line from rank 0"
! grep -q "^\[rank1\]: epoch " "$work/whole.txt" || fail "rank 1 logged epoch lines"
test -s "$work/runs/whole/weights/final.safetensors" || fail "no final weights"

"$bareyolo" train "${common[@]}" "${cpu2[@]}" --epochs 20 --project "$work/runs" --name killed \
  > "$work/killed.txt" 2>&1 &
launcher=$!
for _ in $(seq 600); do  # wait for the first epoch's checkpoint, then kill rank 1
  test -s "$work/runs/killed/weights/last.safetensors" && break
  sleep 0.1
done
test -s "$work/runs/killed/weights/last.safetensors" || fail "no checkpoint after the first epoch"
rank1=$(pgrep -P "$launcher" | sort -n | sed -n 2p)  # workers are forked in rank order
test -n "$rank1" || fail "rank 1's process not found"
kill -9 "$rank1"
if wait "$launcher"; then fail "the run survived a killed rank"; fi
grep -q "rank 1 was killed by signal 9 (SIGKILL)" "$work/killed.txt" || fail "no message naming the dead rank: $(tail -n 5 "$work/killed.txt")"
grep -qF "its last checkpoint, $work/runs/killed/weights/last.safetensors, is intact: continue with --resume" "$work/killed.txt" || fail "the failure line does not name the checkpoint: $(tail -n 2 "$work/killed.txt")"
"$bareyolo" train --resume "$work/runs/killed" > "$work/resumed.txt" 2>&1 \
  || fail "resume after the kill failed: $(tail -n 5 "$work/resumed.txt")"
cmp "$work/runs/whole/weights/final.safetensors" "$work/runs/killed/weights/final.safetensors" \
  || fail "killed-and-resumed final weights differ from the uninterrupted run's"

"$bareyolo" train "${common[@]}" "${cpu2[@]}" --epochs 20 --max-steps 5 --project "$work/runs" \
  --name stopped > /dev/null 2>&1 || fail "--max-steps run failed"
"$bareyolo" train --resume "$work/runs/stopped" > /dev/null 2>&1 || fail "resume after --max-steps failed"
cmp "$work/runs/whole/weights/final.safetensors" "$work/runs/stopped/weights/final.safetensors" \
  || fail "stopped-and-resumed final weights differ from the uninterrupted run's"

# 3b. elastic: the launcher restarts the job itself after the kill.
"$bareyolo" train "${common[@]}" "${cpu2[@]}" --epochs 20 --save-steps 5 --max-restarts 1 \
  --project "$work/runs" --name elastic > "$work/elastic.txt" 2>&1 &
launcher=$!
for _ in $(seq 600); do  # the first step checkpoint, then kill rank 1
  test -s "$work/runs/elastic/weights/step5.safetensors" && break
  sleep 0.1
done
test -s "$work/runs/elastic/weights/step5.safetensors" || fail "no step checkpoint with --save-steps 5"
rank1=$(pgrep -P "$launcher" | sort -n | sed -n 2p)
test -n "$rank1" || fail "rank 1's process not found (elastic)"
kill -9 "$rank1"
wait "$launcher" || fail "the run did not survive a killed rank with --max-restarts 1: $(tail -n 5 "$work/elastic.txt")"
grep -Eq "restart 1 of 1 after rank 1 was killed by signal 9 \(SIGKILL\): continuing from .*/elastic/weights/last.safetensors \(epoch [0-9]+, optimizer step [0-9]+\)" \
  "$work/elastic.txt" || fail "no restart line naming the cause and the step: $(grep -m3 restart "$work/elastic.txt")"
cmp "$work/runs/whole/weights/final.safetensors" "$work/runs/elastic/weights/final.safetensors" \
  || fail "restarted final weights differ from the uninterrupted run's"

# 4. torchrun's environment, set by hand: no spawn; rank 1 (in its own empty directory) writes
# nothing there, and nothing of rank 1's reaches the run directory but what rank 0 wrote.
port=$(free_ports 2)
mkdir -p "$work/rank0" "$work/rank1"
# The ranks are children of this shell, as torchrun's are of its agent: they derive their
# store token through a private file named by that parent (process_group.h), so `env -C`
# sets each one's folder without a subshell in between.
for r in 0 1; do
  RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=$port TORCHELASTIC_RUN_ID=ddp-test env -C "$work/rank$r" \
    "$bareyolo" train "${common[@]}" --device cpu --epochs 1 --project "$work/runs" \
    --name launched > "$work/launched$r.txt" 2>&1 &
done
wait %1 || fail "torchrun-style rank failed: $(tail -n 5 "$work/launched0.txt" "$work/launched1.txt")"
wait %2 || fail "torchrun-style rank failed: $(tail -n 5 "$work/launched1.txt")"
grep -q "launched by torchrun: rank 0 of 2" "$work/launched0.txt" || fail "no launcher notice"
! grep -q "starting 2 ranks" "$work/launched0.txt" || fail "spawned under a launcher"
test -z "$(ls -A "$work/rank1")" || fail "rank 1 wrote into its directory: $(ls -A "$work/rank1")"
grep -q "^epoch 1/1 " "$work/launched0.txt" || fail "no epoch line from rank 0"
! grep -q "^epoch " "$work/launched1.txt" || fail "rank 1 logged epoch lines"
test -s "$work/runs/launched/weights/final.safetensors" || fail "no final weights from rank 0"
test ! -e "$work/runs/launched2" || fail "a second run directory appeared"

# 4b. a torchrun restart: both ranks killed after the first step checkpoint, then started again
# as torchrun would, with TORCHELASTIC_RESTART_COUNT=1 and the same TORCHELASTIC_RUN_ID.
start_torchrun_job() {  # $1: the restart count; sets pids
  local port r
  port=$(free_ports 2)
  pids=()
  for r in 0 1; do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port TORCHELASTIC_RUN_ID=elastic-test TORCHELASTIC_RESTART_COUNT=$1 \
      env -C "$work/rank$r" "$bareyolo" train "${common[@]}" --device cpu --epochs 20 \
      --save-steps 5 --project "$work/runs" --name torchelastic > "$work/torchelastic$1.$r.txt" 2>&1 &
    pids+=($!)
  done
}
start_torchrun_job 0
for _ in $(seq 600); do
  test -s "$work/runs/torchelastic/weights/step5.safetensors" && break
  sleep 0.1
done
test -s "$work/runs/torchelastic/weights/step5.safetensors" || fail "torchrun job: no step checkpoint"
kill -9 "${pids[@]}"
wait "${pids[@]}" 2> /dev/null || true
start_torchrun_job 1
wait "${pids[0]}" || fail "restarted torchrun rank 0 failed: $(tail -n 5 "$work/torchelastic1.0.txt")"
wait "${pids[1]}" || fail "restarted torchrun rank 1 failed: $(tail -n 5 "$work/torchelastic1.1.txt")"
grep -Eq "torchrun restart 1 of job elastic-test: continuing from .*/torchelastic/weights/last.safetensors \(epoch [0-9]+, optimizer step [0-9]+\)" \
  "$work/torchelastic1.0.txt" || fail "the restarted job did not continue its run: $(head -n 3 "$work/torchelastic1.0.txt")"
test ! -e "$work/runs/torchelastic2" || fail "the restarted torchrun job opened a new run directory"
cmp "$work/runs/whole/weights/final.safetensors" "$work/runs/torchelastic/weights/final.safetensors" \
  || fail "the torchrun-restarted final weights differ from the uninterrupted run's"

# 6. two "machines" (--nnodes 2, one rank each) on this one: node 0 serves the store on the
# given port, both present the same token; one run directory, written by global rank 0.
port=$(free_ports 1)
for r in 0 1; do
  BAREYOLO_STORE_TOKEN=two-nodes "$bareyolo" train "${common[@]}" --device cpu --nproc-per-node 1 \
    --nnodes 2 --node-rank $r --master-port "$port" --epochs 1 --project "$work/runs" \
    --name nodes > "$work/node$r.txt" 2>&1 &
done
wait %1 || fail "node 0 failed: $(tail -n 5 "$work/node0.txt")"
wait %2 || fail "node 1 failed: $(tail -n 5 "$work/node1.txt")"
grep -q "starting 1 ranks on cpu (node 1 of 2)" "$work/node1.txt" || fail "node 1 did not start"
test -s "$work/runs/nodes/weights/final.safetensors" || fail "two nodes: no final weights"
test ! -e "$work/runs/nodes2" || fail "two nodes: a second run directory appeared"

# 5. the real torchrun, where Debian's python3-torch is installed.
if /usr/bin/python3 -c "import torch.distributed.run" 2> /dev/null; then
  (cd "$work" && /usr/bin/python3 -m torch.distributed.run --nproc_per_node=2 \
     --redirects 0:1,1:1 --tee 0:1,1:1 --log_dir "$work/torchrun-logs" --no_python \
     "$bareyolo" train "${common[@]}" --device cpu --epochs 1 --project "$work/runs" \
     --name torchrun > "$work/torchrun.txt" 2>&1) || fail "torchrun failed: $(tail -20 "$work/torchrun.txt")"
  grep -q "launched by torchrun: rank 0 of 2" "$work/torchrun.txt" || fail "torchrun: no notice"
  test -s "$work/runs/torchrun/weights/final.safetensors" || fail "torchrun: no final weights"
  echo "train ddp: real torchrun passed"
else
  echo "train ddp: python3-torch not installed; the real torchrun case was not run"
fi
echo "train ddp: all steps passed"
