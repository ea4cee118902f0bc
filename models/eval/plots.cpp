// models/eval/plots.cpp — see plots.h.
#include "models/eval/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "data/chart.h"
#include "data/preview.h"
#include "data/raster.h"

namespace bareyolo::models {

namespace {

namespace fs = std::filesystem;

constexpr int kWidth = 900, kHeight = 600, kTextScale = 2;
constexpr int kNamedClasses = 20;  // more classes: grey lines without a legend entry, as YOLOv5
constexpr data::Rgb kMeanColour = {31, 119, 180};
constexpr data::Rgb kClassGrey = {150, 150, 150};
constexpr float kPlottedConf = 0.25f;

std::string class_name(int cls, const std::vector<std::string>& names) {
  return cls >= 0 && cls < int(names.size()) ? names[size_t(cls)] : std::to_string(cls);
}

std::string fixed(double v, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

// The point-wise mean of the class curves (zeros without classes).
std::vector<double> mean_curve(const std::vector<std::vector<double>>& curves) {
  std::vector<double> mean(size_t(kCurvePoints), 0.0);
  for (const std::vector<double>& curve : curves)
    for (size_t i = 0; i < mean.size(); ++i) mean[i] += curve[i] / double(curves.size());
  return mean;
}

// One curve picture: a thin line per class (named in the legend with `class_value` when there
// are few classes), then the mean thick, named "all classes " + `mean_text`.
data::Image curve_picture(const std::string& title, const std::string& x_label,
                          const std::string& y_label,
                          const std::vector<std::vector<double>>& curves,
                          const DetectionMetrics& metrics, const std::vector<std::string>& names,
                          const std::function<std::string(size_t)>& class_value,
                          const std::string& mean_text) {
  data::Image image(kWidth, kHeight, 255);
  data::Chart chart(image, {0, 0, kWidth, kHeight}, title, x_label, y_label, {0, 1}, {0, 1},
                    kTextScale);
  const std::vector<double> grid = curve_grid();
  const bool named = curves.size() <= size_t(kNamedClasses);
  std::vector<std::pair<std::string, data::Rgb>> legend;
  for (size_t c = 0; c < curves.size(); ++c) {
    const int cls = metrics.classes[c].class_id;
    const data::Rgb colour = named ? data::class_colour(cls) : kClassGrey;
    chart.line(grid, curves[c], colour, 1);
    if (named) legend.push_back({class_name(cls, names) + " " + class_value(c), colour});
  }
  chart.line(grid, mean_curve(curves), kMeanColour, 3 * kTextScale / 2);
  legend.push_back({"all classes " + mean_text, kMeanColour});
  chart.legend(legend);
  return image;
}

// The legend of the F1/P/R pictures: the mean curve's highest value and its confidence.
std::string best_of(const std::vector<double>& mean) {
  const std::vector<double> grid = curve_grid();
  const size_t best = size_t(std::max_element(mean.begin(), mean.end()) - mean.begin());
  return fixed(mean[best], 2) + " at " + fixed(grid[best], 3);
}

// White to dark blue, as matplotlib's "Blues".
data::Rgb blues(double fraction) {
  const double f = std::clamp(fraction, 0.0, 1.0);
  auto mix = [&](double light, double dark) {
    return uint8_t(std::lround(light + f * (dark - light)));
  };
  return {mix(247, 8), mix(251, 48), mix(255, 107)};
}

}  // namespace

void write_metric_curves(const std::string& dir, const DetectionMetrics& metrics,
                         const std::vector<std::string>& names) {
  const fs::path folder(dir);
  const MetricCurves& curves = metrics.curves;
  data::write_image((folder / "PR_curve.png").string(),
                    curve_picture(
                        "Precision-Recall Curve", "Recall", "Precision", curves.precision_at_recall,
                        metrics, names, [&](size_t c) { return fixed(metrics.classes[c].ap50, 3); },
                        fixed(metrics.map50, 3) + " mAP@0.5"));
  const struct {
    const char* file;
    const char* name;
    const std::vector<std::vector<double>>& curves;
  } by_confidence[] = {{"F1_curve.png", "F1", curves.f1},
                       {"P_curve.png", "Precision", curves.precision},
                       {"R_curve.png", "Recall", curves.recall}};
  for (const auto& [file, name, class_curves] : by_confidence)
    data::write_image(
        (folder / file).string(),
        curve_picture(
            std::string(name) + "-Confidence Curve", "Confidence", name, class_curves, metrics,
            names, [](size_t) { return ""; }, best_of(mean_curve(class_curves))));
}

data::Image render_confusion_matrix(const ConfusionMatrix& matrix,
                                    const std::vector<std::string>& names) {
  const int n = matrix.classes() + 1;  // with background
  constexpr int kMargin = 120, kSize = 720;
  const int cell = std::max(1, kSize / n);
  const int side = cell * n;
  data::Image image(kMargin + side + 20, kMargin + side + 60, 255);
  const std::string title = "Confusion Matrix (columns: true class, normalised)";
  data::draw_text(image, kMargin, 12, title, data::kBlack, kTextScale);
  const bool annotate = n < 30, label = n < 50;  // YOLOv5 writes values below 30 classes
  auto name_of = [&](int i) {
    return i == n - 1 ? std::string("background") : class_name(i, names);
  };
  for (int truth = 0; truth < n; ++truth) {
    int64_t column = 0;
    for (int predicted = 0; predicted < n; ++predicted) column += matrix.at(predicted, truth);
    for (int predicted = 0; predicted < n; ++predicted) {
      const double fraction = double(matrix.at(predicted, truth)) / (double(column) + 1e-9);
      const int x = kMargin + truth * cell, y = kMargin + predicted * cell;
      if (fraction >= 0.005)  // YOLOv5 leaves smaller fractions blank
        data::fill_rect(image, x, y, x + cell, y + cell, blues(fraction));
      const std::string text = fixed(fraction, 2);
      const int scale = data::text_width(text, kTextScale) + 4 < cell ? kTextScale : 1;
      if (annotate && fraction >= 0.005 && data::text_width(text, scale) + 2 < cell)
        data::draw_text(image, x + (cell - data::text_width(text, scale)) / 2,
                        y + (cell - data::text_height(scale)) / 2, text,
                        fraction > 0.5 ? data::kWhite : data::kBlack, scale);
    }
  }
  data::outline_rect(image, kMargin, kMargin, kMargin + side + 1, kMargin + side + 1, 1,
                     data::kBlack);
  for (int i = 0; label && i < n; ++i) {
    // Names are cut to the cell along x; along y they have the whole left margin.
    std::string along_x = name_of(i);
    while (along_x.size() > 1 && data::text_width(along_x) > cell - 2) along_x.pop_back();
    data::draw_text(image, kMargin + i * cell + (cell - data::text_width(along_x)) / 2,
                    kMargin + side + 4, along_x, data::kBlack);
    std::string along_y = name_of(i);
    while (along_y.size() > 1 && data::text_width(along_y) > kMargin - 8) along_y.pop_back();
    data::draw_text(image, kMargin - 4 - data::text_width(along_y),
                    kMargin + i * cell + (cell - data::text_height()) / 2, along_y, data::kBlack);
  }
  data::draw_text(image, kMargin + side / 2 - data::text_width("True", kTextScale) / 2,
                  kMargin + side + 24, "True", data::kBlack, kTextScale);
  data::draw_text(image, 4, kMargin - 2 * data::text_height(kTextScale), "Predicted", data::kBlack,
                  kTextScale);
  return image;
}

void write_val_batch_pictures(const std::string& dir, const data::Batch& batch,
                              const std::vector<std::vector<Detection>>& detections,
                              const std::vector<std::string>& names) {
  const fs::path folder(dir);
  data::write_image((folder / "val_batch0_labels.jpg").string(), data::render_batch(batch, names));
  std::vector<data::BatchBox> boxes;
  for (size_t i = 0; i < detections.size(); ++i)
    for (const Detection& d : detections[i])
      if (d.conf > kPlottedConf)
        boxes.push_back({int(i), d.box.x1, d.box.y1, d.box.x2, d.box.y2, d.class_id, d.conf});
  data::write_image((folder / "val_batch0_pred.jpg").string(),
                    data::render_batch(batch, names, boxes));
}

void write_validation_plots(const std::string& dir, const DetectionMetrics& metrics,
                            const ConfusionMatrix& confusion,
                            const std::vector<std::string>& names) {
  write_metric_curves(dir, metrics, names);
  data::write_image((fs::path(dir) / "confusion_matrix.png").string(),
                    render_confusion_matrix(confusion, names));
}

}  // namespace bareyolo::models
