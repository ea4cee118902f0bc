#!/usr/bin/env bash
# tests/shell/train_smoke.sh BAREYOLO MODEL_YAML — `bareyolo train` end to end on a tiny built-in
# dataset: it must finish, leave the run directory complete (last/best/final weights,
# results.csv with YOLOv5's columns and one row per epoch, results.jsonl, report.html), weights
# that `val` reads, a positive finite loss every epoch; take its settings from --config with the
# command line winning; number a second run exp2-style; and continue a run stopped by
# --max-steps with --resume to the same end; run with --amp --grad-dtype bf16; and train with
# hyp.scratch-high's mixup and copy-paste.
set -euo pipefail
bareyolo=$1 cfg=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "train smoke: $*" >&2; exit 1; }

"$bareyolo" make-shapes --out "$work/shapes" --n-train 48 --n-val 8 --imgsz 64 --classes 2
# --config gives epochs 2 and batch 8; the command line's --epochs 8 wins.
printf 'epochs: 2\nbatch: 8\nimgsz: 64\nworkers: 1\nsave_period: 4\n' > "$work/config.yaml"
"$bareyolo" train --config "$work/config.yaml" --data "$work/shapes/data.yaml" --cfg "$cfg" \
  --epochs 8 --project "$work/runs" --name smoke > "$work/log.txt"
run="$work/runs/smoke"
test "$(wc -l < "$run/results.csv")" -eq 9 || fail "results.csv should have header + 8 epochs"
head -1 "$run/results.csv" | grep -q '^epoch,train/box_loss,train/obj_loss,train/cls_loss,metrics/precision,metrics/recall,metrics/mAP_0.5,metrics/mAP_0.5:0.95,val/box_loss,val/obj_loss,val/cls_loss,x/lr0,x/lr1,x/lr2,x/data_wait$' \
  || fail "results.csv header"
test "$(wc -l < "$run/results.jsonl")" -eq 8 || fail "results.jsonl should have 8 lines"
for f in last best final epoch4 epoch8; do
  test -s "$run/weights/$f.safetensors" || fail "missing weights/$f.safetensors"
done
test "$(grep -c '<svg' "$run/report.html")" -eq 4 || fail "report.html should hold 4 charts"
grep -q "mAP50-95" "$work/log.txt" || fail "no validation table in the log"
# Every epoch's training loss (box + obj + cls, columns 2-4) is a positive finite number.
awk -F, 'NR > 1 { l = $2 + $3 + $4; if (!(l > 0 && l < 100)) { print "bad loss " l; exit 1 } }' \
  "$run/results.csv"
"$bareyolo" val --cfg "$cfg" --weights "$run/weights/final.safetensors" \
  --data "$work/shapes/data.yaml" --imgsz 64 --project "$work/val" | grep -q "^ *all "

# Stopped by --max-steps (mid-epoch: 6 batches per epoch), then resumed to the end.
"$bareyolo" train --data "$work/shapes/data.yaml" --cfg "$cfg" --epochs 2 --batch 8 --imgsz 64 \
  --workers 1 --project "$work/runs" --name smoke --max-steps 3 > "$work/log2.txt"
resumed="$work/runs/smoke2"
test -s "$resumed/weights/last.safetensors" || fail "no resumable checkpoint after --max-steps"
test ! -e "$resumed/weights/final.safetensors" || fail "final weights of an unfinished run"
grep -q -- "--resume" "$work/log2.txt" || fail "no hint how to resume"
"$bareyolo" train --resume "$resumed" > "$work/log3.txt"
test -s "$resumed/weights/final.safetensors" || fail "the resumed run did not finish"
test "$(wc -l < "$resumed/results.csv")" -eq 3 || fail "resumed results.csv should have 2 epochs"
if "$bareyolo" train --resume "$resumed" > "$work/log4.txt" 2>&1; then
  fail "resuming a finished run should fail"
fi
grep -q "already finished (2 epochs); nothing to resume. To train further, start a new run from its weights: --weights $resumed/weights/last.safetensors" "$work/log4.txt" ||
  fail "no reason given for refusing the resume: $(cat "$work/log4.txt")"

# --amp and --grad-dtype bf16 from the command line, on 2 CPU ranks: the run says so and stops
# (--max-steps, so that last stays a checkpoint), which keeps fp32 masters (no BF16 record).
"$bareyolo" train --data "$work/shapes/data.yaml" --cfg "$cfg" --epochs 1 --batch 8 --imgsz 64 \
  --workers 1 --device cpu --nproc-per-node 2 --amp --grad-dtype bf16 --no-val --max-steps 3 \
  --project "$work/runs" --name amp > "$work/log5.txt" 2>&1 || fail "--amp run: $(tail -3 "$work/log5.txt")"
grep -q "mixed precision (--amp)" "$work/log5.txt" || fail "the --amp run does not say so"
test -s "$work/runs/amp/weights/last.safetensors" || fail "no checkpoint from the --amp run"
grep -aq '"F32"' "$work/runs/amp/weights/last.safetensors" || fail "no F32 record in the checkpoint"
! grep -aq '"BF16"' "$work/runs/amp/weights/last.safetensors" || fail "bf16 masters in a checkpoint"
# hyp.scratch-high (scratch-low's values but these, ../shared/spec/yolov5.md section 3.1): mixup
# and copy-paste on; one epoch must finish and the run's hyp.yaml keep them.
printf 'lrf: 0.1\ncls: 0.3\nobj: 0.7\nscale: 0.9\nmixup: 0.1\ncopy_paste: 0.1\n' > "$work/high.yaml"
"$bareyolo" train --data "$work/shapes/data.yaml" --cfg "$cfg" --hyp "$work/high.yaml" \
  --epochs 1 --batch 8 --imgsz 64 --workers 1 --no-val --project "$work/runs" --name high \
  > "$work/log6.txt" 2>&1 || fail "hyp.scratch-high run: $(tail -3 "$work/log6.txt")"
test -s "$work/runs/high/weights/final.safetensors" || fail "the hyp.scratch-high run did not finish"
grep -qx 'mixup: 0.1' "$work/runs/high/hyp.yaml" && grep -qx 'copy_paste: 0.1' "$work/runs/high/hyp.yaml" \
  || fail "the run's hyp.yaml lost mixup or copy_paste"
echo "train smoke: all steps passed"
