// tests/unit/plots.cpp — what the run's pictures show, probed by their pixels: results.png's ten
// panels (each its own field, in YOLOv5's order, validation's with gaps), labels.jpg's class
// counts, box centres and sizes, the correlogram's lower triangle and its colour saturation,
// the confusion matrix's normalised columns, and the P/R/F1/PR curves' mean lines.
// train_pictures.cpp checks that a run writes them all.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "data/dataset.h"
#include "data/image.h"
#include "data/raster.h"
#include "models/eval/plots.h"
#include "models/train/outputs/plots.h"
#include "tests/support/data_fixtures.h"
#include "tests/support/pixels.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

constexpr data::Rgb kBlue = {31, 119, 180};  // the pictures' blue (matplotlib's first colour)

// Panel `index` (row-major) of a picture split into `columns` x `rows` equal panels.
PixelBox panel(const data::Image& image, int columns, int rows, int index) {
  const int w = image.width / columns, h = image.height / rows;
  const int x = index % columns * w, y = index / columns * h;
  return {x, y, x + w, y + h};
}

// The mean row of the pixels of `colour` in column x; NaN when there are none.
double mean_row(const data::Image& image, int x, data::Rgb colour) {
  double sum = 0;
  int n = 0;
  for_each_of_colour(image, colour, {x, 0, x + 1, image.height}, [&](int, int y) {
    sum += y;
    ++n;
  });
  return n ? sum / n : std::nan("");
}

// The centre of the pixels of `colour` in `within`, relative to its top-left corner.
std::pair<double, double> centre_of(const data::Image& image, data::Rgb colour, PixelBox within) {
  const PixelBox box = colour_extent(image, colour, within);
  REQUIRE(box[2] > box[0]);
  return {(box[0] + box[2]) / 2.0 - within[0], (box[1] + box[3]) / 2.0 - within[1]};
}

data::Dataset one_image(std::vector<data::LabelBox> boxes) {
  return data::Dataset({{"a.jpg", 64, 64, std::move(boxes)}}, {"a", "b"});
}

}  // namespace

TEST_CASE("results.png: ten panels in YOLOv5's order, each its own field, validation's gaps") {
  using M = models::EpochMetrics;
  double M::*const fields[] = {&M::train_box, &M::train_obj, &M::train_cls, &M::precision,
                               &M::recall,    &M::val_box,   &M::val_obj,   &M::val_cls,
                               &M::map50,     &M::map50_95};
  for (int p = 0; p < 10; ++p) {
    CAPTURE(p);
    // This field rises over three epochs; every other one stays 0, drawn flat mid-panel.
    std::vector<M> history(3);
    for (int e = 0; e < 3; ++e) {
      history[size_t(e)].epoch = e;
      history[size_t(e)].validated = true;
      history[size_t(e)].*fields[p] = e;
    }
    const data::Image image = models::render_results(history);
    for (int q = 0; q < 10; ++q) {
      const PixelBox box = panel(image, 5, 2, q);
      const int third = (box[3] - box[1]) / 3;
      const int upper = count_colour(image, kBlue, {box[0], box[1], box[2], box[1] + third});
      const int middle =
          count_colour(image, kBlue, {box[0], box[1] + third, box[2], box[3] - third});
      CHECK_MESSAGE((upper > 0) == (q == p), "panel " << q);  // only the rising line gets up
      if (q != p) CHECK_MESSAGE(middle > 0, "panel " << q);   // the flat ones in the middle
    }
    // Epoch 1 not validated: a validation panel shows two lone dots of 5 x 5 pixels, a
    // training panel still its line.
    history[1].validated = false;
    const data::Image gap = models::render_results(history);
    const int drawn = count_colour(gap, kBlue, panel(gap, 5, 2, p));
    if (p >= 3)
      CHECK(drawn == 2 * 5 * 5);
    else
      CHECK(drawn > 200);
  }
}

TEST_CASE("labels.jpg: instances per class, centres with y upwards, sizes as width by height") {
  // Class 1 three times, class 0 once; each box centred near the image's top left (y = 0.1)
  // and 0.1 wide by 0.8 tall.
  std::vector<data::LabelBox> boxes;
  for (int cls : {0, 1, 1, 1}) boxes.push_back({cls, 0.2f, 0.1f, 0.1f, 0.8f});
  const data::Image image = models::render_labels(one_image(boxes));
  const PixelBox counts = panel(image, 3, 1, 0), centres = panel(image, 3, 1, 1),
                 sizes = panel(image, 3, 1, 2);
  const int bar0 = count_colour(image, data::class_colour(0), counts);
  const int bar1 = count_colour(image, data::class_colour(1), counts);
  CHECK(bar0 > 0);
  CHECK(double(bar1) == doctest::Approx(3.0 * bar0).epsilon(0.05));
  const double half = (centres[2] - centres[0]) / 2.0;
  const auto [centre_x, centre_y] = centre_of(image, kBlue, centres);
  CHECK(centre_x < half);
  CHECK(centre_y < half);  // y = 0.1 from the image's top is high in the chart
  const auto [width, height] = centre_of(image, kBlue, sizes);
  CHECK(width < half);   // 0.1 wide: left
  CHECK(height < half);  // 0.8 tall: high
}

TEST_CASE("labels_correlogram.jpg: the lower triangle, 2-D histograms saturating at pmax 0.9") {
  // 30 boxes in 30 x bins at y = 0.5, and 2 in one bin at x = 0.91: the densest cells that
  // hold a tenth of the 32 boxes (seaborn's pmax = 0.9, as YOLOv5 asks) include cells of one
  // box, so every occupied cell is drawn in full colour.
  std::vector<data::LabelBox> boxes;
  for (int k = 0; k < 30; ++k) boxes.push_back({0, float((k + 0.5) / 50), 0.5f, 0.3f, 0.3f});
  boxes.insert(boxes.end(), 2, {0, 0.91f, 0.5f, 0.3f, 0.3f});
  const data::Image image = models::render_labels_correlogram(one_image(boxes));
  // Columns x, y, width, height; panel (row r, column c) is index 4 r + c.
  for (int r = 0; r < 4; ++r)
    for (int c = r + 1; c < 4; ++c) {
      const PixelBox upper = panel(image, 4, 4, 4 * r + c);
      CHECK(count_colour(image, data::kWhite, upper) ==
            (upper[2] - upper[0]) * (upper[3] - upper[1]));
    }
  const PixelBox y_by_x = panel(image, 4, 4, 4);
  const PixelBox cells = colour_extent(image, kBlue, y_by_x);
  CHECK(cells[2] - cells[0] > 4 * (cells[3] - cells[1]));  // a row of cells: x spread, y one bin
  // The single boxes' cells, in the left half, are in full colour too.
  const PixelBox left_half = {y_by_x[0], y_by_x[1], (y_by_x[0] + y_by_x[2]) / 2, y_by_x[3]};
  CHECK(count_colour(image, kBlue, left_half) > 0);
  const PixelBox x_histogram = colour_extent(image, kBlue, panel(image, 4, 4, 0));
  const PixelBox y_histogram = colour_extent(image, kBlue, panel(image, 4, 4, 5));
  CHECK(x_histogram[2] - x_histogram[0] > (y_by_x[2] - y_by_x[0]) / 3);
  CHECK(y_histogram[2] - y_histogram[0] < (y_by_x[2] - y_by_x[0]) / 20);  // one bin at 0.5
}

TEST_CASE("confusion_matrix.png: columns are true classes, each normalised, small ones blank") {
  // Row-major (predicted, true) counts of 2 classes and background: a class-0 label and a
  // class-1 label both predicted as class 0, so predicted row 0 holds all of true columns 0 and
  // 1 (fraction 1 each) and every other cell is empty.
  const std::vector<int64_t> counts = {1, 1, 0, 0, 0, 0, 0, 0, 0};
  const data::Image image =
      models::render_confusion_matrix(models::ConfusionMatrix::from_counts(2, counts), {"a", "b"});
  const data::Rgb darkest = {8, 48, 107}, lightest = {247, 251, 255};  // matplotlib's Blues
  const PixelBox dark = colour_extent(image, darkest);
  // Two cells side by side in one row (the frame covers their top row and left column).
  CHECK(std::abs((dark[2] - dark[0]) - 2 * (dark[3] - dark[1])) <= 1);
  CHECK(count_colour(image, data::kWhite, dark) > 0);  // "1.00" in white on the dark cells
  CHECK(count_colour(image, lightest) == 0);           // empty cells stay white
}

TEST_CASE("PR, F1, P and R curves: each picture its own curves, the mean between its classes") {
  TempDir dir;
  auto flat = [](double v) { return std::vector<double>(size_t(models::kCurvePoints), v); };
  models::DetectionMetrics metrics;
  metrics.classes = {{.class_id = 0}, {.class_id = 1}};
  // Two classes at their own levels in each picture: means 0.7 (P), 0.6 (PR), 0.4 (F1), 0.2 (R).
  metrics.curves.precision = {flat(0.9), flat(0.5)};
  metrics.curves.precision_at_recall = {flat(0.8), flat(0.4)};
  metrics.curves.f1 = {flat(0.5), flat(0.3)};
  metrics.curves.recall = {flat(0.3), flat(0.1)};
  models::write_metric_curves(dir.path().string(), metrics, {"a", "b"});
  std::vector<double> mean_rows;
  for (const char* name : {"P_curve.png", "PR_curve.png", "F1_curve.png", "R_curve.png"}) {
    CAPTURE(name);
    const data::Image image = data::read_image((dir.path() / name).string());
    const int x = image.width / 4;  // left of the legend
    const double mean = mean_row(image, x, kBlue);
    const double first = mean_row(image, x, data::class_colour(0));
    const double second = mean_row(image, x, data::class_colour(1));
    CHECK(first < mean);  // a higher value is drawn higher
    CHECK(mean < second);
    CHECK(std::abs(mean - (first + second) / 2) <= 2);
    mean_rows.push_back(mean);
  }
  CHECK(std::adjacent_find(mean_rows.begin(), mean_rows.end(), std::greater_equal<>()) ==
        mean_rows.end());

  // More than 20 classes: grey lines without legend entries, as YOLOv5 draws them.
  metrics.classes.clear();
  for (int c = 0; c < 21; ++c) metrics.classes.push_back({.class_id = c});
  metrics.curves = {};
  for (auto* curves : {&metrics.curves.precision, &metrics.curves.precision_at_recall,
                       &metrics.curves.f1, &metrics.curves.recall})
    for (int c = 0; c < 21; ++c) curves->push_back(flat(c % 2 ? 0.8 : 0.2));
  models::write_metric_curves(dir.path().string(), metrics, {});
  const data::Image many = data::read_image((dir.path() / "P_curve.png").string());
  CHECK(std::isfinite(mean_row(many, many.width / 4, {150, 150, 150})));
}
