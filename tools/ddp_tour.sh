#!/usr/bin/env bash
# tools/ddp_tour.sh — break a data-parallel job on purpose and watch what bareyolo does
# (docs/ddp.md, "Break it: a tour"). About 10 seconds on 2 cores; ctest runs it (ddp_tour).
#
#   tools/ddp_tour.sh [BAREYOLO (build/bareyolo)]
#
# On a built-in shapes dataset (made in a temporary folder) the tiny model trains on 2 CPU
# ranks forked by bareyolo's own launcher:
#   1. a clean run: what a healthy job prints;
#   2. rank 1 SIGKILLed mid-run: how long rank 0 and then the launcher, the last process, take
#      to exit after the kill, and what they say;
#   3. the same kill across two "nodes" (two launchers, --nnodes 2, on this machine): no
#      supervisor of rank 0 sees rank 1 die, so rank 0 learns it from its ring link;
#   4. the same kill with --max-restarts 1: the launcher restarts the job from its newest
#      checkpoint and the run finishes;
#   5. a desynchronised job: two nodes whose copies of the dataset differ (16 and 24 training
#      images under the same yaml), so rank 0 ends its epoch a step early and issues another
#      collective than rank 1: both stop at the first frame, naming the two collectives.
# Only production code runs; nothing is injected. Prints the lines worth reading of each run.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath -m "${1:-$repo/build/bareyolo}")
[ -x "$bin" ] || { echo "ddp tour: no $bin: build it (tools/setup.sh) or name one" >&2; exit 1; }
cfg=$repo/models/yolov5-tiny.yaml
tmp=$(mktemp -d -t bareyolo-tour.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT

echo "ddp tour: $bin; files under $tmp (shown as \$TOUR)"
"$bin" make-shapes --out "$tmp/shapes" --n-train 32 --n-val 8 --imgsz 64 --classes 2 > /dev/null
train=("$bin" train --data "$tmp/shapes/data.yaml" --cfg "$cfg" --imgsz 64 --batch 8 --nbs 8
       --workers 0 --device cpu --nproc-per-node 2 --project "$tmp/runs")
# One node of a two-node job on this machine (then --node-rank, --data and the rest); started
# as a simple command, so that $! is its launcher and the launcher's child its rank.
node_train=(env BAREYOLO_STORE_TOKEN=tour "$bin" train --cfg "$cfg" --imgsz 64 --batch 8 --nbs 8
            --workers 0 --device cpu --nproc-per-node 1 --nnodes 2 --project "$tmp/runs")

# A free loopback port for the two-node runs' store.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }
# The lines of a run's log worth reading: the launcher's, errors, restarts, epochs' ends; the
# temporary folder shown as $TOUR.
show() {
  grep -E '^\[launcher\]|^starting|error|restart|^\[rank0\]: epoch [0-9]+/|^done:' "$1" |
    sed -e "s|$tmp|\$TOUR|g" -e 's/^/    /' || true
}
# Waits until FILE exists (a checkpoint), up to a minute; polled every 10 ms, as the run goes
# on while its checkpoints are written.
wait_for_file() {
  for _ in $(seq 6000); do
    [ -s "$1" ] && return 0
    sleep 0.01
  done
  echo "ddp tour: $1 never appeared" >&2
  exit 1
}
# Waits until process PID has exited (gone, or a zombie not yet reaped by its parent).
wait_for_exit() {
  while [ -e "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; do
    sleep 0.002
  done
}

echo "== 1. two CPU ranks train the tiny model for 3 epochs"
"${train[@]}" --epochs 3 --name clean > "$tmp/clean.txt" 2>&1
show "$tmp/clean.txt"

echo "== 2. SIGKILL rank 1 after the step-5 checkpoint; no restarts"
"${train[@]}" --epochs 30 --save-steps 5 --name killed > "$tmp/killed.txt" 2>&1 &
launcher=$!
wait_for_file "$tmp/runs/killed/weights/step5.safetensors"
mapfile -t workers < <(pgrep -P "$launcher" | sort -n)  # forked in rank order
rank0=${workers[0]} rank1=${workers[1]}
killed_at=$(now_ms)
kill -9 "$rank1"
wait_for_exit "$rank0"
rank0_exit=$(now_ms)
wait "$launcher" && status=0 || status=$?
launcher_exit=$(now_ms)
show "$tmp/killed.txt"
echo "    -> rank 0 exited $((rank0_exit - killed_at)) ms after the kill; the launcher, the last" \
     "process, $((launcher_exit - killed_at)) ms after it, with status $status"

echo "== 3. two nodes, one rank each; SIGKILL node 1's rank after the step-5 checkpoint"
port=$(free_port)
nodes=()
for node in 0 1; do
  "${node_train[@]}" --node-rank "$node" --data "$tmp/shapes/data.yaml" --master-port "$port" --epochs 30 \
    --save-steps 5 --name nodes > "$tmp/nodes$node.txt" 2>&1 &
  nodes+=($!)
done
wait_for_file "$tmp/runs/nodes/weights/step5.safetensors"
rank0=$(pgrep -P "${nodes[0]}") rank1=$(pgrep -P "${nodes[1]}")
killed_at=$(now_ms)
kill -9 "$rank1"
wait_for_exit "$rank0"
rank0_exit=$(now_ms)
for pid in "${nodes[@]}"; do wait "$pid" || true; done
last_exit=$(now_ms)
for node in 0 1; do
  echo "  node $node:"
  show "$tmp/nodes$node.txt"
done
echo "    -> rank 0 exited $((rank0_exit - killed_at)) ms after the kill; the last process" \
     "$((last_exit - killed_at)) ms after it"

echo "== 4. the same kill with --max-restarts 1"
# Ten epochs (40 steps): the run must still be going when the step-5 checkpoint appears.
"${train[@]}" --epochs 10 --save-steps 5 --max-restarts 1 --name elastic > "$tmp/elastic.txt" 2>&1 &
launcher=$!
wait_for_file "$tmp/runs/elastic/weights/step5.safetensors"
rank1=$(pgrep -P "$launcher" | sort -n | sed -n 2p)
killed_at=$(now_ms)
kill -9 "$rank1"
until grep -q "restart 1 of 1 after" "$tmp/elastic.txt"; do
  kill -0 "$launcher" 2>/dev/null || break  # ended without restarting: the log says why
  sleep 0.002
done
restarted_at=$(now_ms)
wait "$launcher" && status=0 || status=$?
show "$tmp/elastic.txt"
echo "    -> the restart began $((restarted_at - killed_at)) ms after the kill; the run ended" \
     "with status $status"

echo "== 5. two nodes whose dataset copies differ: 16 and 24 training images, one yaml"
for node in 0 1; do
  "$bin" make-shapes --out "$tmp/node$node" --n-train $((16 + 8 * node)) --n-val 4 --imgsz 64 \
    --classes 2 > /dev/null
  sed -i '/^path:/d' "$tmp/node$node/data.yaml"  # the yaml's own folder: the same text on both
done
cmp -s "$tmp/node0/data.yaml" "$tmp/node1/data.yaml"  # so the ranks' configurations agree
port=$(free_port)
nodes=()
for node in 0 1; do
  "${node_train[@]}" --node-rank "$node" --data "$tmp/node$node/data.yaml" --master-port "$port" --epochs 2 \
    --name desync > "$tmp/desync$node.txt" 2>&1 &
  nodes+=($!)
done
for pid in "${nodes[@]}"; do wait "$pid" || true; done
for node in 0 1; do
  echo "  node $node:"
  show "$tmp/desync$node.txt"
done
echo "ddp tour: done"
