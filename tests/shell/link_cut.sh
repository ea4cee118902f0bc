#!/usr/bin/env bash
# tests/shell/link_cut.sh BAREYOLO MODEL_YAML — a cut network link ends a job within seconds,
# whatever --timeout is, and a stopped rank is not taken for one. Two "nodes" (--nnodes 2, one
# CPU rank each, each with its own launcher) train over loopback inside a user+network
# namespace of their own (`unshare -rn`: no root needed; exit 77, skipped, where it is refused):
#   1. `ip link set lo down` mid-training cuts the link (established loopback connections stop
#      passing packets; no FIN or RST ever arrives): with --timeout 3600 both launchers and both
#      workers exit non-zero within 15 s, and each node's log names its unreachable peer;
#   2. a rank SIGSTOPped for 12 s, caught while its neighbour's data waits on its shut receive
#      window (small socket buffers in the namespace make that likely; found with `ss`), then
#      SIGCONTinued, is not taken for a cut link: its kernel goes on answering, and the run
#      completes on both nodes. (Linux's TCP_USER_TIMEOUT would end that wait as a lost link.)
set -euo pipefail
bareyolo=$(realpath "$1") cfg=$(realpath "$2")
source "$(dirname "$0")/network_namespace.sh"
reenter_in_network_namespace "link cut" ip ss -- "$@"

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
fail() { echo "link cut: $*" >&2; exit 1; }
ip link set lo up
# Small socket buffers (this namespace's own): a few KB of ring data fill a stopped rank's window.
if ! sysctl -qw net.ipv4.tcp_rmem="4096 4096 8192" net.ipv4.tcp_wmem="4096 4096 8192"; then
  echo "link cut: skipped: this kernel keeps TCP buffer sizes out of a namespace's reach"
  exit 77
fi
readonly port=29500  # this namespace's own loopback: nothing else listens here

"$bareyolo" make-shapes --out "$work/shapes" --n-train 16 --n-val 4 --imgsz 64 --classes 2 > /dev/null

# start_nodes NAME EPOCHS: both nodes' launchers in the background, their pids in `nodes` (not
# job numbers: a second run's jobs are not %1 and %2). On one host `auto` would join them
# through shared memory; the link under test is the TCP ring's.
start_nodes() {
  nodes=()
  for r in 0 1; do
    BAREYOLO_STORE_TOKEN=link-cut "$bareyolo" train --data "$work/shapes/data.yaml" --cfg "$cfg" \
      --imgsz 64 --batch 4 --workers 1 --epochs "$2" --timeout 3600 --device cpu --backend tcp \
      --nproc-per-node 1 --nnodes 2 --node-rank $r --master-port $port --project "$work/runs" \
      --name "$1" > "$work/$1-node$r.txt" 2>&1 &
    nodes+=($!)
  done
}
# wait_for_epoch NAME N: until node 0's log shows epoch N done (at most 60 s).
wait_for_epoch() {
  for _ in $(seq 600); do
    grep -q "epoch $2/" "$work/$1-node0.txt" && return
    test -n "$(jobs -rp)" || break  # both nodes ended
    sleep 0.1
  done
  fail "$1: epoch $2 never ended: $(tail -n 5 "$work/$1-node0.txt")"
}
# The worker forked by the launcher `pid` (one rank per node).
worker_of() { pgrep -P "$1" | head -n 1; }
# running PID...: is any of them running? (An exited launcher stays a zombie until waited for.)
running() { ps -o stat= -p "$(echo "$@" | tr ' ' ,)" | grep -qv '^Z'; }

# 1. the cut.
start_nodes cut 500
wait_for_epoch cut 1
processes=("${nodes[@]}" $(for launcher in "${nodes[@]}"; do worker_of "$launcher"; done))
test ${#processes[@]} = 4 || fail "cut: expected 2 launchers and 2 workers: ${processes[*]}"
ip link set lo down
cut_at=$EPOCHREALTIME
for _ in $(seq 150); do running "${processes[@]}" || break; sleep 0.1; done
running "${processes[@]}" && fail "cut: still running 15 s after the cut: $(ps -o pid=,args= -p "$(echo "${processes[@]}" | tr ' ' ,)")"
echo "link cut: every process exited $(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $cut_at }") s after the cut"
for r in 0 1; do
  status=0
  wait "${nodes[r]}" || status=$?
  test "$status" != 0 || fail "cut: node $r exited 0"
  peer=$((1 - r))
  grep -Eq "rank $peer \(127\.0\.0\.1:[0-9]+\) unreachable: no TCP acknowledgement for [0-9]+ s — the network link was cut or the host is down" \
    "$work/cut-node$r.txt" || fail "cut: node $r does not name rank $peer as unreachable: $(tail -n 4 "$work/cut-node$r.txt")"
done
ip link set lo up

# 2. a stopped rank, resumed. It is stopped again and again, briefly, until some socket keeps
# data queued for it (a shut window: on loopback nothing else holds a send queue for 0.2 s), then
# for 12 s, half again the 8 s without an acknowledgement that count as a cut link; the job waits
# for it (it would finish in a few seconds else), and finishes after.
# Where a shut window is rare (it needs rank 1 stopped between its last meeting of a step and
# rank 0's gradient bucket), the short run can end first: it is then run again, up to 3 times.
window_shut() { ss -Htn state established | awk '$2 > 0 { shut = 1 } END { exit !shut }'; }
# catch_shut_window: leaves rank 1 stopped with its window shut and sets `caught` to the stop
# that did it; fails when the run ended first or 40 stops missed.
catch_shut_window() {
  for try in $(seq 40); do
    kill -STOP "$rank1" 2> /dev/null || return 1
    sleep 0.2
    if window_shut; then caught=$try; return 0; fi
    kill -CONT "$rank1"
    sleep 0.0$((RANDOM % 10))
  done
  return 1
}
caught=
for attempt in 1 2 3; do
  run=stop$attempt
  start_nodes $run 40
  wait_for_epoch $run 1
  rank1=$(worker_of "${nodes[1]}")
  catch_shut_window && break
  echo "link cut: run $attempt ended or 40 stops missed before rank 1's window was caught shut"
  kill -CONT "$rank1" 2> /dev/null || true
  kill "${nodes[@]}" 2> /dev/null || true
  wait "${nodes[@]}" || true
done
test -n "$caught" || fail "stop: 3 runs of 40 stops each never caught rank 1's receive window shut"
echo "link cut: rank 1 stopped with its receive window shut (run $attempt, stop $caught), for 12 s"
sleep 12
grep -q '^State:.*stopped' "/proc/$rank1/status" || fail "stop: rank 1 ($rank1) is not stopped"
for r in 0 1; do
  running "${nodes[r]}" || fail "stop: node $r ended while rank 1 was stopped: $(tail -n 4 "$work/$run-node$r.txt")"
done
kill -CONT "$rank1"
for r in 0 1; do
  wait "${nodes[r]}" || fail "stop: node $r failed: $(tail -n 4 "$work/$run-node$r.txt")"
done
grep -q "epoch 40/40" "$work/$run-node0.txt" || fail "stop: the run did not reach its last epoch"
echo "link cut: all steps passed"
