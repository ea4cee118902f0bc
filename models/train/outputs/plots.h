// models/train/outputs/plots.h — the pictures YOLOv5's train.py leaves in a run directory,
// drawn by rank 0 (off with --noplots):
//   labels.jpg            at the start: instances per class, box centres, box sizes
//   labels_correlogram.jpg
//                         at the start: the boxes' x, y, width and height against each other
//   train_batch0..2.jpg   the run's first three batches as trained (mosaics), labels drawn
//   val_batch0_*.jpg      each validation's first batch (models/eval/plots.h), the last kept
//   results.png           at the end: YOLOv5's 2x5 grid of losses and metrics per epoch
//   PR/F1/P/R_curve.png, confusion_matrix.png
//                         at the end, from the last validation (models/eval/plots.h)
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/image.h"
#include "models/train/callbacks.h"

namespace bareyolo::models {

// The pictures' file names, in the order report.html shows them.
std::vector<std::string> run_picture_names();

// results.png: train box/obj/cls loss, precision, recall on top; val box/obj/cls loss,
// mAP50, mAP50-95 below; epochs that were not validated leave gaps.
data::Image render_results(const std::vector<EpochMetrics>& history);

// labels.jpg of a split: the instances per class, then every box's centre (x, y) and size
// (width, height), normalised to the image.
data::Image render_labels(const data::Dataset& dataset);

// labels_correlogram.jpg of a split (YOLOv5's seaborn pairplot, its lower triangle): the
// histogram of each of the boxes' normalised x, y, width, height on the diagonal, and the 2-D
// histogram of each pair below it.
data::Image render_labels_correlogram(const data::Dataset& dataset);

// The callbacks that write the pictures above (but val_batch0_*, which the validation draws:
// models/eval/plots.h) into the run directory. `train` is the training split (labels.jpg);
// it must outlive the run.
TrainCallbacks plots_writer(const data::Dataset& train);

}  // namespace bareyolo::models
