#!/usr/bin/env bash
# tests/shell/train_checks.sh BAREYOLO MODEL_YAML — `bareyolo train` refuses what cannot be
# right before it writes anything (issue 52): contradictory flags, repeated keys, hyp values out
# of range, run names outside --project, --max-steps 0, a YOLOv5 opt.yaml asking for --quad; it
# takes a YOLOv5 opt.yaml as --config (with single_cls, and val --single-cls after it; with rect
# and multi_scale on, applied); its --imgsz message says the true reason; --resume refuses flags
# that would change the run, naming the difference, and continues a run started with --device
# cpu as one process, ending bit for bit like the run that was not interrupted; more --epochs
# and other --workers are applied.
set -euo pipefail
bareyolo=$1 cfg=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "train checks: $*" >&2; exit 1; }

# refused "EXPECTED TEXT" ARGS...: train ARGS must fail with that text and, run in an empty
# folder, leave it empty (no built-in data generated, no run directory).
refused() {
  local expected=$1 empty="$work/empty"
  shift
  rm -rf "$empty" && mkdir "$empty"
  # (bounded: a binary that does not refuse would start the main job here)
  if (cd "$empty" && timeout 30 "$bareyolo" train "$@") > "$work/out.txt" 2>&1; then
    fail "train $* should fail"
  fi
  grep -qF -- "$expected" "$work/out.txt" || fail "train $*: no '$expected' in: $(cat "$work/out.txt")"
  [ -z "$(ls -A "$empty")" ] || fail "train $* wrote $(ls -A "$empty") before refusing"
}

refused "--sync-bn and --no-sync-bn were both given" --sync-bn --no-sync-bn
refused "--amp and --no-amp were both given" --no-amp --amp
refused "amp was given a disallowed flag override" --amp=false  # not a silent default
printf 'sync_bn: true\nno_sync_bn: true\n' > "$work/both.yaml"
refused "--sync-bn and --no-sync-bn were both given" --config "$work/both.yaml"
printf 'amp: off\n' > "$work/amp_off.yaml"
refused "amp: off' switches nothing: write true to ask for --amp, or ask for --no-amp" \
  --config "$work/amp_off.yaml"
printf 'epochs: 2\nbatch: 8\nepochs: 3\n' > "$work/twice.yaml"
refused "twice.yaml:3: 'epochs' is given twice (first on line 1)" --config "$work/twice.yaml"
printf 'lr0: 0.01\nlr0: 0.02\n' > "$work/hyp_twice.yaml"
refused "hyp_twice.yaml:2: 'lr0' is given twice (first on line 1)" --hyp "$work/hyp_twice.yaml"
printf 'lr0: .nan\n' > "$work/nan.yaml"
refused "nan.yaml:1: lr0 = nan must be > 0" --hyp "$work/nan.yaml"
printf 'lr0: -0.01\n' > "$work/negative.yaml"
refused "negative.yaml:1: lr0 = -0.01 must be > 0" --hyp "$work/negative.yaml"
printf 'anchor_t: 0\n' > "$work/anchor.yaml"
refused "anchor.yaml:1: anchor_t = 0 must be > 1" --hyp "$work/anchor.yaml"
for name in ../x /abs "" . ..; do
  refused "--name '$name': a run name must be one folder name inside --project" --name "$name"
done
refused "--max-steps: must be a positive number of optimizer steps" --max-steps 0
refused "--cudnn: fastest not in {deterministic,fast}" --cudnn fastest

# A run started with --device cpu, --amp, --winograd off and --cudnn fast and stopped, then
# resumed: flags that would change it are refused with the differences named; resumed alone it
# continues as one process with the run's numerics (either one lost changes the weights), its
# bf16 weight copies the checkpoint's (stopped after 3 steps: warm-up's first barely moves the
# weights, and copies of the fresh ones passed for the checkpoint's).
"$bareyolo" make-shapes --out "$work/shapes" --n-train 16 --n-val 4 --imgsz 64 --classes 2 >/dev/null
common=(--data "$work/shapes/data.yaml" --cfg "$cfg" --epochs 1 --batch 4 --workers 1 --device cpu
  --project "$work/runs")
train=("${common[@]}" --imgsz 64 --amp --winograd off --cudnn fast)
"$bareyolo" train "${train[@]}" --name whole > "$work/whole.txt"
"$bareyolo" train "${train[@]}" --name stopped --max-steps 3 > "$work/stopped.txt"
run="$work/runs/stopped"
test -s "$run/weights/last.safetensors" || fail "no checkpoint after --max-steps"
if "$bareyolo" train --resume "$run" --epochs 1 --imgsz 128 --batch 2 --winograd on \
  --cudnn deterministic --no-amp --no-val --name other --label-smoothing 0.1 --no-sync-bn \
  > "$work/out.txt" 2>&1; then
  fail "--resume with another --imgsz and --batch should fail"
fi
for expected in "--imgsz 128 given, the run was started with --imgsz 64" \
  "--batch 2 given, the run was started with --batch 4" \
  "--no-val given, the run was started without it" \
  "--name other given, the run continues in its own directory $run" \
  "--label-smoothing 0.1 sets label_smoothing 0.1, the run was started with label_smoothing 0.0" \
  "--no-sync-bn given, the run was started with SyncBatchNorm (--sync-bn)" \
  "--amp off given, the run was started with --amp on" \
  "--winograd on given, the run was started with --winograd off" \
  "--cudnn deterministic given, the run was started with --cudnn fast"; do
  grep -qF -- "$expected" "$work/out.txt" || fail "no '$expected' in: $(cat "$work/out.txt")"
done
"$bareyolo" train --resume "$run" > "$work/resumed.txt" 2>&1 || fail "resume: $(tail -3 "$work/resumed.txt")"
! grep -q "starting [0-9]* ranks" "$work/resumed.txt" || fail "a --device cpu run resumed as several ranks"
cmp -s "$work/runs/whole/weights/final.safetensors" "$run/weights/final.safetensors" ||
  fail "the resumed run's final weights differ from the uninterrupted run's"
# What a resume may change: more epochs (the schedule stretched) and the loader threads.
"$bareyolo" train "${train[@]}" --name extended --max-steps 1 > /dev/null
"$bareyolo" train --resume "$work/runs/extended" --epochs 2 --workers 2 > "$work/extended.txt" 2>&1 ||
  fail "resume with more epochs: $(tail -3 "$work/extended.txt")"
for expected in "--epochs 2 given, the run was started with 1: it continues to 2 epochs" \
  "--workers 2 applied" "epoch 2/2 "; do
  grep -qF -- "$expected" "$work/extended.txt" || fail "no '$expected' in: $(cat "$work/extended.txt")"
done
grep -qx "workers: 2" "$work/runs/extended/opt.yaml" || fail "--workers 2 not in the resumed opt.yaml"

# YOLOv5 v7.0's opt.yaml as --config: what it leaves off (false, null, '', its -1s) asks for
# nothing, its save_dir is named and skipped, the rest applies (here the run lands in --project
# and --name as the file says, with --noval's epoch line); a switch bareyolo lacks is refused.
cat > "$work/yolov5_opt.yaml" <<YAML
weights: ''
cfg: $cfg
data: $work/shapes/data.yaml
hyp: $work/runs/whole/hyp.yaml
epochs: 1
batch_size: 4
imgsz: 64
rect: false
resume: false
nosave: false
noval: true
noautoanchor: false
noplots: false
evolve: null
bucket: ''
cache: null
image_weights: false
device: cpu
multi_scale: false
single_cls: true
optimizer: SGD
sync_bn: false
workers: 1
project: $work/runs
name: from_yolov5
exist_ok: false
quad: false
cos_lr: false
label_smoothing: 0.0
patience: 100
freeze:
- 0
save_period: -1
seed: 0
local_rank: -1
entity: null
upload_dataset: false
bbox_interval: -1
artifact_alias: latest
save_dir: runs/train/exp
YAML
"$bareyolo" train --config "$work/yolov5_opt.yaml" --max-steps 1 > "$work/yolov5.txt" 2>&1 ||
  fail "YOLOv5's opt.yaml: $(tail -3 "$work/yolov5.txt")"
grep -qF "'save_dir' describes YOLOv5's run, not applied" "$work/yolov5.txt" ||
  fail "YOLOv5's opt.yaml: no note on save_dir in: $(cat "$work/yolov5.txt")"
test -s "$work/runs/from_yolov5/opt.yaml" || fail "YOLOv5's opt.yaml: no run in --project/--name"
# Its single_cls: true trained the 2-class data as one class, 'item', and says so in opt.yaml.
grep -q "^single_cls: true$" "$work/runs/from_yolov5/opt.yaml" || fail "--single-cls not in opt.yaml"
grep -aqF '"names":"item","nc":"1"' "$work/runs/from_yolov5/weights/last.safetensors" ||
  fail "the --single-cls run's checkpoint does not hold one class, item"

# val --single-cls scores the 2-class model (it keeps its classes) as one class over every label.
"$bareyolo" val --weights "$work/runs/whole/weights/final.safetensors" \
  --data "$work/shapes/data.yaml" --imgsz 64 --noplots --single-cls > "$work/single.txt" ||
  fail "val --single-cls: $(tail -3 "$work/single.txt")"
rows=$(awk '$2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ {print $1 "=" $3}' "$work/single.txt" | tr '\n' ' ')
instances=$(awk '$1 == "all" {print $3}' "$work/single.txt")
[ "$rows" = "all=$instances item=$instances " ] && [ "$instances" -gt 4 ] ||
  fail "val --single-cls should score one class 'item' over all labels: $rows"
sed -e 's/^rect: false/rect: true/' -e 's/^multi_scale: false/multi_scale: true/' \
  -e 's/^name: from_yolov5/name: from_yolov5_rect/' "$work/yolov5_opt.yaml" > "$work/yolov5_rect.yaml"
"$bareyolo" train --config "$work/yolov5_rect.yaml" --max-steps 1 > "$work/yolov5_rect.txt" 2>&1 ||
  fail "YOLOv5's opt.yaml with rect: $(tail -3 "$work/yolov5_rect.txt")"
for key in "rect: true" "multi_scale: true"; do
  grep -qx "$key" "$work/runs/from_yolov5_rect/opt.yaml" ||
    fail "YOLOv5's opt.yaml: '$key' not applied: $(cat "$work/runs/from_yolov5_rect/opt.yaml")"
done
sed 's/^quad: false/quad: true/' "$work/yolov5_opt.yaml" > "$work/yolov5_quad.yaml"
refused "'quad': --quad: YOLOv5's --quad is refused" --config "$work/yolov5_quad.yaml"

# --imgsz 32 is a multiple of 32: the note gives the real reason (training's minimum, 64).
"$bareyolo" train "${common[@]}" --imgsz 32 --name small --max-steps 1 > "$work/small.txt" 2>&1 ||
  fail "--imgsz 32: $(tail -3 "$work/small.txt")"
grep -qF -- "--imgsz 32 is below the minimum of 64: using 64" "$work/small.txt" ||
  fail "--imgsz 32: $(grep imgsz "$work/small.txt")"
echo "train checks: all steps passed"
