// models/train/outputs/plots.cpp — see plots.h.
#include "models/train/outputs/plots.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <numeric>

#include "data/chart.h"
#include "data/preview.h"
#include "models/eval/plots.h"

namespace bareyolo::models {

namespace {

namespace fs = std::filesystem;

constexpr int kTextScale = 2;
constexpr int kTrainBatchPictures = 3;  // train_batch0..2.jpg, as YOLOv5
constexpr data::Rgb kBlue = {31, 119, 180};
constexpr int kHistogramBins = 50;  // plot_labels' bins

// Every label box's normalised x, y, width and height (centre and size), one column each.
std::array<std::vector<double>, 4> box_columns(const data::Dataset& dataset) {
  std::array<std::vector<double>, 4> columns;
  for (const data::ImageRecord& record : dataset.records())
    for (const data::LabelBox& box : record.boxes)
      for (int k = 0; const double v : {box.cx, box.cy, box.w, box.h})
        columns[size_t(k++)].push_back(v);
  return columns;
}

// The bin of a value in [0, 1] among `bins` equal ones (1 itself in the last).
int bin_of(double value) { return std::clamp(int(value * kHistogramBins), 0, kHistogramBins - 1); }

// The count at which a 2-D histogram's colour saturates: seaborn's pmax = 0.9, which YOLOv5
// passes: the densest cells that together hold 10% of the boxes are drawn at full colour, so
// that a few crowded cells do not wash out the rest.
double saturation_count(std::vector<double> counts) {
  std::sort(counts.begin(), counts.end(), std::greater<>());
  const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  double densest = 0;
  for (const double count : counts)
    if ((densest += count) >= 0.1 * total) return std::max(count, 1.0);
  return 1;  // no boxes
}

// The 2-D histogram of (xs[i], ys[i]) over [0, 1]^2 in `chart`: each non-empty cell filled
// from white towards blue by its count.
void draw_histogram_2d(data::Image& image, const data::Chart& chart, const std::vector<double>& xs,
                       const std::vector<double>& ys) {
  std::vector<double> counts(size_t(kHistogramBins) * kHistogramBins, 0.0);
  for (size_t i = 0; i < xs.size(); ++i)
    ++counts[size_t(bin_of(ys[i])) * kHistogramBins + size_t(bin_of(xs[i]))];
  const double saturation = saturation_count(counts);
  auto pixel = [](double v) { return int(std::lround(v)); };
  for (int row = 0; row < kHistogramBins; ++row)
    for (int column = 0; column < kHistogramBins; ++column) {
      const double count = counts[size_t(row) * kHistogramBins + size_t(column)];
      if (count == 0) continue;
      const double shade = std::min(count / saturation, 1.0);
      auto channel = [shade](uint8_t full) {
        return uint8_t(std::lround(255 + (full - 255) * shade));
      };
      const double bin = 1.0 / kHistogramBins;
      data::fill_rect(image, pixel(chart.to_x(column * bin)), pixel(chart.to_y((row + 1) * bin)),
                      pixel(chart.to_x((column + 1) * bin)), pixel(chart.to_y(row * bin)),
                      {channel(kBlue[0]), channel(kBlue[1]), channel(kBlue[2])});
    }
}

}  // namespace

std::vector<std::string> run_picture_names() {
  return {
      "results.png",        "confusion_matrix.png", "PR_curve.png",     "F1_curve.png",
      "P_curve.png",        "R_curve.png",          "labels.jpg",       "labels_correlogram.jpg",
      "train_batch0.jpg",   "train_batch1.jpg",     "train_batch2.jpg", "val_batch0_labels.jpg",
      "val_batch0_pred.jpg"};
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
  for (const data::ImageRecord& record : dataset.records())
    for (const data::LabelBox& box : record.boxes)
      if (box.class_id >= 0 && box.class_id < classes) ++instances[size_t(box.class_id)];
  const auto [x, y, width, height] = box_columns(dataset);
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

data::Image render_labels_correlogram(const data::Dataset& dataset) {
  const std::array<std::vector<double>, 4> columns = box_columns(dataset);
  const char* const names[] = {"x", "y", "width", "height"};
  constexpr int kPanel = 400;
  data::Image image(4 * kPanel, 4 * kPanel, 255);
  for (int row = 0; row < 4; ++row)
    for (int column = 0; column <= row; ++column) {  // the lower triangle, as corner=True
      const data::ChartRegion region = {column * kPanel, row * kPanel, kPanel, kPanel};
      const std::vector<double>& xs = columns[size_t(column)];
      if (row != column) {
        const data::Chart chart(image, region, "", names[column], names[row], {0, 1}, {0, 1},
                                kTextScale);
        draw_histogram_2d(image, chart, xs, columns[size_t(row)]);
        continue;
      }
      std::vector<double> counts(kHistogramBins, 0.0);
      for (const double v : xs) ++counts[size_t(bin_of(v))];
      data::Chart chart(image, region, "", names[column], "count", {0, 1},
                        {0, *std::max_element(counts.begin(), counts.end()) * 1.05 + 1e-9},
                        kTextScale);
      for (int b = 0; b < kHistogramBins; ++b)
        chart.bar(double(b) / kHistogramBins, double(b + 1) / kHistogramBins, counts[size_t(b)],
                  kBlue);
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
    data::write_image((state->run_dir / "labels_correlogram.jpg").string(),
                      render_labels_correlogram(train));
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
