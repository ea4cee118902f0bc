"""tests/shell/tensorboard_read.py RUN_DIR EPOCHS — reads a run's events file with TensorBoard's
own reader (EventAccumulator, from the `tensorboard` PyPI package) and checks that it lists
YOLOv5's scalar tags, each with one value per epoch at steps 0..EPOCHS-1, the mAPs within [0, 1].
Prints one line per tag; exits 1 naming what is missing."""
import math
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

TAGS = ["train/box_loss", "train/obj_loss", "train/cls_loss", "metrics/precision",
        "metrics/recall", "metrics/mAP_0.5", "metrics/mAP_0.5:0.95", "val/box_loss",
        "val/obj_loss", "val/cls_loss", "x/lr0", "x/lr1", "x/lr2"]


def main():
    run_dir, epochs = sys.argv[1], int(sys.argv[2])
    accumulator = EventAccumulator(run_dir)
    accumulator.Reload()
    listed = accumulator.Tags()["scalars"]
    problems = [f"tag {tag} is not listed (listed: {sorted(listed)})"
                for tag in TAGS if tag not in listed]
    for tag in TAGS:
        if tag not in listed:
            continue
        events = accumulator.Scalars(tag)
        steps = [e.step for e in events]
        values = [e.value for e in events]
        print(f"{tag}: steps {steps} values {[round(v, 5) for v in values]}")
        if steps != list(range(epochs)):
            problems.append(f"{tag}: steps {steps}, expected 0..{epochs - 1}")
        if not all(math.isfinite(v) for v in values):
            problems.append(f"{tag}: a value is not finite: {values}")
        if tag.startswith("metrics/mAP") and not all(0 <= v <= 1 for v in values):
            problems.append(f"{tag}: a value outside [0, 1]: {values}")
    for problem in problems:
        print("FAIL:", problem)
    sys.exit(1 if problems else 0)


main()
