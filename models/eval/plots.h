// models/eval/plots.h — the pictures of a validation, as YOLOv5's val.py draws them (plots on),
// written by `bareyolo val` into its folder and by training into the run directory:
//   PR_curve.png          precision against recall at IoU 0.5, per class and their mean (mAP50)
//   F1_curve.png, P_curve.png, R_curve.png
//                         F1, precision, recall against the confidence threshold
//   confusion_matrix.png  models/eval/confusion_matrix.h, each column (true class) normalised
//   val_batch0_labels.jpg, val_batch0_pred.jpg
//                         the first validation batch with its labels, with its detections
// Drawn with data/chart.h and data/preview.h; names are the dataset's class names.
#pragma once

#include <string>
#include <vector>

#include "data/batch.h"
#include "data/image.h"
#include "models/eval/confusion_matrix.h"
#include "models/eval/metrics.h"

namespace bareyolo::models {

// The four curve pictures, into folder `dir`.
void write_metric_curves(const std::string& dir, const DetectionMetrics& metrics,
                         const std::vector<std::string>& names);

// The matrix as a heat map with its fractions written in the cells (few classes) and the
// class names along both axes.
data::Image render_confusion_matrix(const ConfusionMatrix& matrix,
                                    const std::vector<std::string>& names);

// val_batch0_labels.jpg and val_batch0_pred.jpg into `dir`; `detections` are in the batch's
// pixels, and those above conf 0.25 are drawn (YOLOv5's plot_images threshold).
void write_val_batch_pictures(const std::string& dir, const data::Batch& batch,
                              const std::vector<std::vector<Detection>>& detections,
                              const std::vector<std::string>& names);

// All of a validation's pictures (the curves and the confusion matrix) into `dir`.
void write_validation_plots(const std::string& dir, const DetectionMetrics& metrics,
                            const ConfusionMatrix& confusion,
                            const std::vector<std::string>& names);

}  // namespace bareyolo::models
