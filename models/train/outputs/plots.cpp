// models/train/outputs/plots.cpp — see plots.h.
#include "models/train/outputs/plots.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include "data/chart.h"
#include "data/preview.h"
#include "models/eval/plots.h"

namespace bareyolo::models {

namespace {

namespace fs = std::filesystem;

constexpr int kTextScale = 2;
constexpr int kTrainBatchPictures = 3;  // train_batch0..2.jpg, as YOLOv5
constexpr data::Rgb kBlue = {31, 119, 180};

}  // namespace

std::vector<std::string> run_picture_names() {
  return {"results.png",      "confusion_matrix.png",  "PR_curve.png",
          "F1_curve.png",     "P_curve.png",           "R_curve.png",
          "labels.jpg",       "train_batch0.jpg",      "train_batch1.jpg",
          "train_batch2.jpg", "val_batch0_labels.jpg", "val_batch0_pred.jpg"};
}

data::Image render_results(const std::vector<EpochMetrics>& history) {
  struct Panel {
    const char* title;
    double EpochMetrics::*field;
    bool validation;
  };
  // YOLOv5's results.csv column names, in its plot_results order.
  const Panel panels[] = {{"train/box_loss", &EpochMetrics::train_box, false},
                          {"train/obj_loss", &EpochMetrics::train_obj, false},
                          {"train/cls_loss", &EpochMetrics::train_cls, false},
                          {"metrics/precision", &EpochMetrics::precision, true},
                          {"metrics/recall", &EpochMetrics::recall, true},
                          {"val/box_loss", &EpochMetrics::val_box, true},
                          {"val/obj_loss", &EpochMetrics::val_obj, true},
                          {"val/cls_loss", &EpochMetrics::val_cls, true},
                          {"metrics/mAP_0.5", &EpochMetrics::map50, true},
                          {"metrics/mAP_0.5:0.95", &EpochMetrics::map50_95, true}};
  constexpr int kPanelWidth = 400, kPanelHeight = 360;
  data::Image image(5 * kPanelWidth, 2 * kPanelHeight, 255);
  std::vector<double> epochs;
  for (const EpochMetrics& m : history) epochs.push_back(m.epoch);
  for (int p = 0; p < 10; ++p) {
    std::vector<double> values;
    for (const EpochMetrics& m : history)
      values.push_back(panels[p].validation && !m.validated ? std::nan("") : m.*panels[p].field);
    data::Chart chart(image,
                      {(p % 5) * kPanelWidth, (p / 5) * kPanelHeight, kPanelWidth, kPanelHeight},
                      panels[p].title, "epoch", "", data::finite_range({epochs}),
                      data::finite_range({values}), kTextScale);
    chart.line(epochs, values, kBlue, kTextScale);
    for (size_t i = 0; i < values.size(); ++i)
      if (std::isfinite(values[i])) chart.dot(epochs[i], values[i], kTextScale, kBlue);
  }
  return image;
}

data::Image render_labels(const data::Dataset& dataset) {
  const int classes = int(dataset.names().size());
  std::vector<double> instances(size_t(std::max(classes, 1)), 0.0);
  std::vector<double> x, y, width, height;
  for (const data::ImageRecord& record : dataset.records())
    for (const data::LabelBox& box : record.boxes) {
      if (box.class_id >= 0 && box.class_id < classes) ++instances[size_t(box.class_id)];
      x.push_back(box.cx), y.push_back(box.cy), width.push_back(box.w), height.push_back(box.h);
    }
  constexpr int kPanel = 600;
  data::Image image(3 * kPanel, kPanel, 255);
  data::Chart histogram(image, {0, 0, kPanel, kPanel}, "instances per class", "class", "",
                        {-0.5, std::max(classes, 1) - 0.5},
                        {0, *std::max_element(instances.begin(), instances.end()) * 1.05 + 1e-9},
                        kTextScale);
  for (int c = 0; c < classes; ++c)
    histogram.bar(c - 0.4, c + 0.4, instances[size_t(c)], data::class_colour(c));
  data::Chart centres(image, {kPanel, 0, kPanel, kPanel}, "box centres", "x", "y", {0, 1}, {0, 1},
                      kTextScale);
  data::Chart sizes(image, {2 * kPanel, 0, kPanel, kPanel}, "box sizes", "width", "height", {0, 1},
                    {0, 1}, kTextScale);
  for (size_t i = 0; i < x.size(); ++i) {
    centres.dot(x[i], 1 - y[i], 1, kBlue);  // y downwards in the image, upwards in the chart
    sizes.dot(width[i], height[i], 1, kBlue);
  }
  return image;
}

TrainCallbacks plots_writer(const data::Dataset& train) {
  struct State {
    fs::path run_dir;
    std::vector<std::string> names;
    std::vector<EpochMetrics> history;
    std::optional<ValidationReport> last_validation;
    int train_batches_drawn = 0;
  };
  auto state = std::make_shared<State>();
  TrainCallbacks callbacks;
  callbacks.on_train_start = [state, &train](const TrainStartInfo& run) {
    state->run_dir = run.run_dir;
    state->names = run.names;
    state->history = run.history;
    data::write_image((state->run_dir / "labels.jpg").string(), render_labels(train));
  };
  callbacks.on_train_batch_end = [state](const BatchEndInfo& info) {
    if (!info.batch || state->train_batches_drawn >= kTrainBatchPictures) return;
    const std::string file = "train_batch" + std::to_string(state->train_batches_drawn++) + ".jpg";
    data::write_image((state->run_dir / file).string(),
                      data::render_batch(*info.batch, state->names));
  };
  callbacks.on_val_end = [state](const ValidationReport& report) {
    state->last_validation = report;
  };
  callbacks.on_fit_epoch_end = [state](const EpochMetrics& m) { state->history.push_back(m); };
  callbacks.on_train_end = [state](const TrainEndInfo&) {
    data::write_image((state->run_dir / "results.png").string(), render_results(state->history));
    if (state->last_validation)
      write_validation_plots(state->run_dir.string(), state->last_validation->metrics,
                             state->last_validation->confusion, state->names);
  };
  return callbacks;
}

}  // namespace bareyolo::models
