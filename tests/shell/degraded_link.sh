#!/usr/bin/env bash
# tests/shell/degraded_link.sh BAREYOLO MODEL_YAML LINK_RELAY — training between two nodes
# completes over a slow, lossy link. Two "nodes" (--nnodes 2, one CPU rank each, each with its
# own launcher) live in network namespaces of their own (`unshare -rn`, then `unshare -n`; no
# root needed) whose only link is LINK_RELAY (tests/support/link_relay/): a TUN interface in
# each namespace (10.53.0.1 and 10.53.0.2) and a relay process that carries every IP packet
# between them. Nothing else is reachable: the namespaces have no other interface but their
# own loopback. The same run trains twice over the TCP ring:
#   1. clean: the relay passes every packet at once;
#   2. degraded: 20 ms of delay and 1% of the packets lost, each way (what netem would do; this
#      kernel has none). Whole packets are lost, so TCP retransmits, as on a real link.
# Both complete; the test prints each one's step time (trace-summary of optimizer steps 1..5)
# and the relay's counts, and fails unless the degraded relay really dropped packets.
# Exit 77 (skipped) where the machine refuses namespaces or TUN devices.
set -euo pipefail
bareyolo=$(realpath "$1") cfg=$(realpath "$2") relay=$(realpath "$3")
source "$(dirname "$0")/network_namespace.sh"
reenter_in_network_namespace "degraded link" ip nsenter -- "$@"

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
fail() { echo "degraded link: $*" >&2; exit 1; }
readonly node0_ip=10.53.0.1 node1_ip=10.53.0.2 port=29500

# Node 0 is this namespace; node 1's is held open by a process sleeping inside it.
ip link set lo up
unshare -n sleep 600 &
holder=$!
for _ in $(seq 50); do
  [ "$(readlink /proc/$holder/ns/net)" != "$(readlink /proc/$$/ns/net)" ] && break
  sleep 0.1
done
[ "$(readlink /proc/$holder/ns/net)" != "$(readlink /proc/$$/ns/net)" ] ||
  fail "node 1's namespace never appeared"
on_node1() { nsenter -t "$holder" -n "$@"; }
on_node1 ip link set lo up

# start_link DELAY_MS LOSS_PERCENT: the relay between the namespaces, and both interfaces up.
start_link() {
  "$relay" /proc/$$/ns/net node0 /proc/$holder/ns/net node1 "$1" "$2" > "$work/relay.txt" 2>&1 &
  relay_pid=$!
  for _ in $(seq 50); do
    grep -q "link relay: ready" "$work/relay.txt" && break
    if ! kill -0 $relay_pid 2> /dev/null; then
      status=0
      wait $relay_pid || status=$?
      if [ $status = 77 ]; then
        echo "degraded link: skipped: $(cat "$work/relay.txt")"
        exit 77
      fi
      fail "the relay failed (status $status): $(cat "$work/relay.txt")"
    fi
    sleep 0.1
  done
  grep -q "link relay: ready" "$work/relay.txt" || fail "the relay was not ready within 5 s"
  ip addr add $node0_ip/24 dev node0
  ip link set node0 up
  on_node1 ip addr add $node1_ip/24 dev node1
  on_node1 ip link set node1 up
}
# stop_link NAME: the relay ends (its interfaces with it) and prints its counts to NAME-relay.txt.
stop_link() {
  kill -TERM $relay_pid
  wait $relay_pid || fail "$1: the relay failed: $(cat "$work/relay.txt")"
  grep "packets" "$work/relay.txt" | tee "$work/$1-relay.txt"
}

"$bareyolo" make-shapes --out "$work/shapes" --n-train 24 --n-val 4 --imgsz 64 --classes 2 > /dev/null

# train NAME: both nodes train 6 optimizer steps over the link; prints the step time in ms.
train() {
  local launchers=()
  for r in 0 1; do
    local on=()
    [ $r = 0 ] || on=(nsenter -t "$holder" -n)
    "${on[@]}" env BAREYOLO_STORE_TOKEN=degraded-link "$bareyolo" train \
      --data "$work/shapes/data.yaml" --cfg "$cfg" --imgsz 64 --batch 4 --nbs 4 --workers 1 \
      --epochs 1 --no-val --timeout 30 --device cpu --backend tcp --nproc-per-node 1 \
      --nnodes 2 --node-rank $r --master-addr $node0_ip --master-port $port \
      --trace "$work/$1.json" --trace-steps 1:6 --project "$work/runs" --name "$1-node$r" \
      > "$work/$1-node$r.txt" 2>&1 &
    launchers+=($!)
  done
  for r in 0 1; do
    wait "${launchers[$r]}" || fail "$1: node $r failed: $(tail -n 5 "$work/$1-node$r.txt")"
  done
  "$bareyolo" trace-summary "$work/$1.json" > "$work/$1-summary.txt" ||
    fail "$1: trace-summary failed: $(cat "$work/$1-summary.txt")"
  sed -nE 's/^rank 0: [0-9]+ optimizer step\(s\) traced, ([0-9.]+) ms apart$/\1/p' \
    "$work/$1-summary.txt" | grep . || fail "$1: no step time: $(head -n 3 "$work/$1-summary.txt")"
}

start_link 0 0
clean_ms=$(train clean)
stop_link clean
start_link 20 1
degraded_ms=$(train degraded)
stop_link degraded
lost=$(awk '{ for (i = 1; i < NF; i++) if ($(i + 1) == "lost,") n += $i } END { print n + 0 }' \
  "$work/degraded-relay.txt")
test "$lost" -gt 0 || fail "degraded: the relay lost no packet: $(cat "$work/degraded-relay.txt")"
# Each SyncBN meeting waits for the other node's statistics (20 ms here): they set the step.
meetings=$(sed -nE 's/^SyncBN meetings, all ranks: ([0-9.]+) a step.*/\1/p' "$work/degraded-summary.txt")
echo "degraded link: step time ${clean_ms} ms clean, ${degraded_ms} ms with 20 ms delay and" \
  "1% loss each way ($lost packets lost; ${meetings:-no} SyncBN meetings a step)"
echo "degraded link: all steps passed"
