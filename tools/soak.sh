#!/usr/bin/env bash
# tools/soak.sh — a long run watched for leaks: memory, file descriptors and threads.
#
#   tools/soak.sh [BAREYOLO (build/bareyolo)] [STEPS (2000)] [SAMPLES_TSV]
#
# Trains yolov5-tiny on 2 CPU ranks (bareyolo's own launcher forks them) for STEPS optimizer
# steps on a built-in shapes dataset made in a temporary folder: 128 training images
# (SOAK_TRAIN_IMAGES) of 64 px, batch 8 with --nbs 8 (one optimizer step per batch), validating
# and checkpointing every epoch as a real run does, since validation, checkpoints and the
# per-epoch files are where a leak would grow as much as the step. Every second
# (SOAK_INTERVAL_S) it samples the launcher and each worker (its children; ranks in fork order)
# from /proc: VmRSS, open descriptors (entries of /proc/PID/fd) and Threads, with the steps done
# (epochs in results.jsonl x steps per epoch) until rank 0 reports the last step. The samples
# before 10% of STEPS are the warm-up (allocator arenas, loader buffers, the first validations
# and checkpoints) and are left out, as are those after the last epoch's row (the run's end:
# final pictures and report). SOAK_TRAIN_FLAGS adds train flags (e.g. "--noplots").
#
# RSS rises and falls by ~5% within each epoch (loaders, validation), an epoch's loader threads
# end with it and a checkpoint being written holds a descriptor for a moment, so the rest is
# compared quarter to quarter: RSS growth = the peak of its last quarter over the peak of its
# first; a leak of descriptors or threads lifts their whole band (the last quarter's minimum
# and maximum both above the first's), a state sampled by chance moves one edge only. Prints
# the training's last line, one row per process (warm = first-quarter peak, end = last-quarter
# peak, growth, the ranges of RSS, descriptors and threads), and last:
#   soak: RSS growth A% (limit 5%), fds X..Y, threads P..Q: PASS|FAIL
# (A: the largest growth of any process; the ranges over all). Exit status 1 on FAIL: a growth
# above 5%, a band that rose, fewer than 8 samples after the warm-up, or a failed training.
# SAMPLES_TSV, when given, keeps the samples: seconds, process, pid, steps, rss_kb, fds,
# threads. Not run by CI: docs/training.md has a run's figures.
set -euo pipefail

bin=$(realpath -m "${1:-$(dirname "$0")/../build/bareyolo}")
[ -x "$bin" ] || { echo "soak: no $bin: build it (tools/setup.sh) or name one" >&2; exit 1; }
steps=${2:-2000}
samples_out=${3:-}
interval_s=${SOAK_INTERVAL_S:-1}
n_train=${SOAK_TRAIN_IMAGES:-128} batch=8
steps_per_epoch=$((n_train / batch))

tmp=$(mktemp -d -t bareyolo-soak.XXXXXX)
launcher=
stop_training() { [ -z "$launcher" ] || kill -TERM "$launcher" 2>/dev/null || true; wait; }
trap 'stop_training; exit 130' INT TERM
trap 'stop_training; rm -rf "$tmp"' EXIT

"$bin" make-shapes --out "$tmp/data" --n-train "$n_train" --n-val 32 --imgsz 64 > /dev/null
start_us=${EPOCHREALTIME/./}
"$bin" train --data "$tmp/data/data.yaml" --cfg models/yolov5-tiny.yaml --device cpu \
  --nproc-per-node 2 --imgsz 64 --batch "$batch" --nbs "$batch" --patience 0 \
  --epochs $((steps / steps_per_epoch + 2)) --max-steps "$steps" \
  --project "$tmp/runs" --name soak ${SOAK_TRAIN_FLAGS:-} > "$tmp/train.log" 2>&1 &
launcher=$!
echo "soak: $steps steps of yolov5-tiny on 2 CPU ranks, launcher pid $launcher"

# One row per live process: seconds, process, pid, steps, rss_kb, fds, threads. The status file
# is read in one go: bash's `read` from /proc re-reads it line by line and can lose a line.
sample_process() {  # NAME PID STEPS
  local status fds tenths
  status=$(cat "/proc/$2/status" 2>/dev/null) || return 0  # it may have just ended
  fds=("/proc/$2/fd/"*)
  [[ $status =~ VmRSS:[[:space:]]*([0-9]+).*Threads:[[:space:]]*([0-9]+) ]] || return 0
  tenths=$(((${EPOCHREALTIME/./} - start_us) / 100000))
  printf '%d.%d\t%s\t%s\t%s\t%s\t%s\t%s\n' $((tenths / 10)) $((tenths % 10)) "$1" "$2" "$3" \
    "${BASH_REMATCH[1]}" "${#fds[@]}" "${BASH_REMATCH[2]}"
}
declare -A rank_of  # worker pid -> its number in order of first sight (fork order: the rank)
workers_seen=0
while kill -0 "$launcher" 2>/dev/null; do
  # The run ends at rank 0's "stopped after N optimizer steps (--max-steps)"; what follows is the
  # shutdown, not the run (the launcher touches ~25 MiB more as it exits), and is not sampled.
  [[ $(tail -c 4096 "$tmp/train.log") == *'(--max-steps)'* ]] && break
  done_steps=0
  [ -f "$tmp/runs/soak/results.jsonl" ] &&
    done_steps=$(($(wc -l < "$tmp/runs/soak/results.jsonl") * steps_per_epoch))
  sample_process launcher "$launcher" "$done_steps"
  for worker in $(pgrep -P "$launcher" | sort -n || true); do  # none, at the very end
    [ -n "${rank_of[$worker]:-}" ] || rank_of[$worker]=$((workers_seen++))
    sample_process "rank${rank_of[$worker]}" "$worker" "$done_steps"
  done
  sleep "$interval_s"
done >> "$tmp/samples.tsv"
wait "$launcher" && status=0 || status=$?
launcher=  # reaped: nothing left to stop
wall_s=$(((${EPOCHREALTIME/./} - start_us) / 1000000))
[ -n "$samples_out" ] && cp "$tmp/samples.tsv" "$samples_out"
if [ "$status" -ne 0 ]; then
  tail -n 20 "$tmp/train.log"
  echo "soak: training failed with status $status: FAIL"
  exit 1
fi
tr '\r' '\n' < "$tmp/train.log" | tail -n 1
printf 'soak: %d s wall, %s samples\n' "$wall_s" "$(wc -l < "$tmp/samples.tsv")"

# Left out: the warm-up, and the run's end (once the last epoch's row is in results.jsonl, rank 0
# draws the final pictures and report.html: a one-off peak of a few MiB, not a step's leak).
awk -F'\t' -v warmup_steps=$((steps / 10)) -v steps="$steps" '
  $4 < warmup_steps || $4 >= steps { next }
  !($2 in count) { order[++n] = $2 }
  { k = ++count[$2]; rss[$2, k] = $5; fds[$2, k] = $6; thr[$2, k] = $7 }
  function lo(a, p, from, to,   v, i) {  # the least of a[p, from..to]
    v = a[p, from]; for (i = from; i <= to; i++) if (a[p, i] < v) v = a[p, i]; return v }
  function hi(a, p, from, to,   v, i) {  # the greatest
    v = a[p, from]; for (i = from; i <= to; i++) if (a[p, i] > v) v = a[p, i]; return v }
  function rose(a, p, m, q) {  # both edges of the band of the last quarter above the first
    return lo(a, p, m - q + 1, m) > lo(a, p, 1, q) && hi(a, p, m - q + 1, m) > hi(a, p, 1, q) }
  END {
    if (n == 0) { print "soak: no sample after the warm-up: FAIL"; exit 1 }
    printf "%-8s %7s %9s %9s %7s %13s %7s %7s\n", "process", "samples", "warm MiB", "end MiB",
           "growth", "RSS MiB", "fds", "threads"
    worst = -100; fd_lo = thr_lo = 1e9; fd_hi = thr_hi = 0; fail = 0
    for (i = 1; i <= n; i++) {
      p = order[i]; m = count[p]; q = int((m + 3) / 4)  # first quarter 1..q, last m-q+1..m
      warm = hi(rss, p, 1, q); end = hi(rss, p, m - q + 1, m); growth = 100 * (end - warm) / warm
      printf "%-8s %7d %9.1f %9.1f %6.2f%% %6.1f..%-6.1f %3d..%-3d %3d..%-3d\n", p, m, warm / 1024,
             end / 1024, growth, lo(rss, p, 1, m) / 1024, hi(rss, p, 1, m) / 1024,
             lo(fds, p, 1, m), hi(fds, p, 1, m), lo(thr, p, 1, m), hi(thr, p, 1, m)
      if (m < 8) {
        printf "soak: %d samples of %s: too few to judge, give more STEPS\n", m, p; fail = 1 }
      if (growth > worst) worst = growth
      if (growth > 5) fail = 1
      if (rose(fds, p, m, q) || rose(thr, p, m, q)) {
        printf "soak: %s ends with more descriptors or threads than it began with\n", p
        fail = 1
      }
      if (lo(fds, p, 1, m) < fd_lo) fd_lo = lo(fds, p, 1, m)
      if (hi(fds, p, 1, m) > fd_hi) fd_hi = hi(fds, p, 1, m)
      if (lo(thr, p, 1, m) < thr_lo) thr_lo = lo(thr, p, 1, m)
      if (hi(thr, p, 1, m) > thr_hi) thr_hi = hi(thr, p, 1, m)
    }
    printf "soak: RSS growth %.2f%% (limit 5%%), fds %d..%d, threads %d..%d: %s\n", worst, fd_lo,
           fd_hi, thr_lo, thr_hi, fail ? "FAIL" : "PASS"
    exit fail
  }' "$tmp/samples.tsv"
