// tests/unit/autoanchor.cpp — AutoAnchor (issue 55): its fit numbers on a hand-computed case,
// k-means on points with known clusters, the search finding clusters of label sizes, the label
// sizes and their per-image random factor, the decision (keep above 0.98 recall, else search,
// and keep the old anchors when the new ones match fewer labels) with its log lines, the hyp
// file's `anchors: N`, and a run whose poor anchors AutoAnchor replaced predicting with the new
// ones after reload. coco128 and YOLOv5's own numbers: tests/datasets/autoanchor.cpp; 2 ranks:
// tests/dist/train.cpp; the model's side (placeholders, set_anchors):
// tests/unit/model_anchors.cpp.
#include <cmath>
#include <limits>
#include <random>

#include "data/shapes.h"
#include "engine/shipped_files.h"
#include "models/eval/decode.h"
#include "models/train/autoanchor.h"
#include "models/train/kmeans.h"
#include "models/train/options.h"
#include "models/train/outputs/settings_yaml.h"
#include "models/train/run_model.h"
#include "models/train/trainer.h"
#include "models/yolo/weights.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;
using models::AnchorSize;

namespace {

// A dataset of one image per entry of `images` (width, height, boxes), without files.
data::Dataset records_dataset(
    const std::vector<std::pair<std::array<int, 2>, std::vector<data::LabelBox>>>& images) {
  std::vector<data::ImageRecord> records;
  for (const auto& [size, boxes] : images)
    records.push_back({"image" + std::to_string(records.size()), size[0], size[1], boxes});
  return data::Dataset(records, {"thing"});
}

// Anchors of 300 pixels and more on 64-pixel images: no label is within a factor 4 of any.
const std::vector<std::vector<double>> kPoorAnchors = {
    {300, 300, 310, 310, 320, 320}, {330, 330, 340, 340, 350, 350}, {360, 360, 370, 370, 380, 380}};

// A short run (8 shapes images at 64 px, one epoch) of yolov5-tiny with `anchors` (pixels per
// level) in place of its own.
models::TrainOptions short_run(const fs::path& root,
                               const std::vector<std::vector<double>>& anchors) {
  const models::ModelConfig tiny = models::load_model_config("models/yolov5-tiny.yaml");
  data::make_shapes_dataset({.out = (root / "shapes").string(),
                             .n_train = 8,
                             .n_val = 4,
                             .imgsz = 64,
                             .classes = 2,
                             .seed = 0});
  write_text(root / "model.yaml", models::yaml_text_with_anchors(tiny, anchors));
  models::TrainOptions options;
  options.data = (root / "shapes" / "data.yaml").string();
  options.cfg = (root / "model.yaml").string();
  options.epochs = 1, options.batch = 4, options.imgsz = 64, options.workers = 1;
  options.show_progress = false, options.plots = false, options.tensorboard = false;
  options.run_dir = (root / "run").string();
  return options;
}

// Square labels of `sides` pixels on 64-pixel images, one image each.
data::Dataset square_labels(const std::vector<float>& sides) {
  std::vector<std::pair<std::array<int, 2>, std::vector<data::LabelBox>>> images;
  for (float side : sides) images.push_back({{64, 64}, {{0, 0.5f, 0.5f, side / 64, side / 64}}});
  return records_dataset(images);
}

// yolov5-tiny with nine anchors of `side` x `side` pixels, and AutoAnchor's lines on it.
struct AnchorCheck {
  models::DetectionModel model{models::load_model_config(shipped_file("models/yolov5-tiny.yaml"))};
  std::vector<std::string> lines;

  explicit AnchorCheck(double side) {
    model.set_anchors(std::vector<std::vector<double>>(3, std::vector<double>(6, side)));
  }
  bool run(const data::Dataset& dataset) {
    // No genetic search: the anchors are k-means' (test cases above test the search).
    return models::autoanchor(model, dataset, {.imgsz = 64, .generations = 0},
                              [&](const std::string& line) { lines.push_back(line); });
  }
};

}  // namespace

TEST_CASE("anchor fit: best possible recall and anchors per target of a hand-computed case") {
  // anchor_t 4: an anchor can match a label when min(r, 1/r) > 0.25 in both dimensions.
  //   (10, 10):  (10, 10) gives 1, (20, 20) gives 0.5         -> 2 anchors, matched
  //   (40, 20):  (10, 10) gives min(0.25, 0.5) = 0.25, not above (strict); (20, 20) 0.5
  //                                                           -> 1 anchor, matched
  //   (100, 100): 0.1 and 0.2                                 -> none
  const std::vector<AnchorSize> sizes = {{10, 10}, {40, 20}, {100, 100}};
  const std::vector<AnchorSize> anchors = {{10, 10}, {20, 20}};
  const models::AnchorFit fit = models::anchor_fit(sizes, anchors, 4.0);
  CHECK(fit.best_possible_recall == doctest::Approx(2.0 / 3));
  CHECK(fit.anchors_per_target == doctest::Approx(1.0));
  // anchor_t 10: (100, 100) against (20, 20) gives 0.2 > 0.1; (40, 20) now fits both.
  const models::AnchorFit loose = models::anchor_fit(sizes, anchors, 10.0);
  CHECK(loose.best_possible_recall == doctest::Approx(1.0));
  CHECK(loose.anchors_per_target == doctest::Approx((2 + 2 + 1) / 3.0));
  // YOLOv5's placeholder anchors (0, 1) match nothing: w / 0 is infinite, its inverse 0.
  CHECK(models::anchor_fit(sizes, {{0, 1}}, 4.0).best_possible_recall == 0);
}

TEST_CASE("kmeans: the two clusters of a hand-made set, and their mean distance") {
  // Two columns of two points: the best split is by column (centroids (0, 1) and (10, 1), every
  // point 1 away); splitting by row leaves every point 5 away, a local optimum that a start
  // from (0, 0) and (0, 2) settles in: the restarts find the better one.
  const std::vector<models::Point2> points = {{0, 0}, {0, 2}, {10, 0}, {10, 2}};
  data::SampleRng rng(7, 0, 0);
  models::KMeansResult result = models::kmeans(points, 2, 30, rng);
  REQUIRE(result.centroids.size() == 2);
  std::sort(result.centroids.begin(), result.centroids.end());
  CHECK(result.centroids[0] == models::Point2{0, 1});
  CHECK(result.centroids[1] == models::Point2{10, 1});
  CHECK(result.mean_distance == 1);
  CHECK_THROWS_AS(models::kmeans(points, 5, 30, rng), std::invalid_argument);
  CHECK_THROWS_AS(models::kmeans(points, 0, 30, rng), std::invalid_argument);
}

TEST_CASE("kmeans: three clusters of random points are found at their centres") {
  const std::vector<models::Point2> centres = {{1, 1}, {5, 5}, {9, 1}};
  std::mt19937_64 generator(3);
  std::normal_distribution<double> jitter(0, 0.1);
  std::vector<models::Point2> points;
  for (int i = 0; i < 300; ++i) {
    const models::Point2& c = centres[size_t(i % 3)];
    points.push_back({c[0] + jitter(generator), c[1] + jitter(generator)});
  }
  data::SampleRng rng(1, 0, 0);
  models::KMeansResult result = models::kmeans(points, 3, 10, rng);
  REQUIRE(result.centroids.size() == 3);
  std::sort(result.centroids.begin(), result.centroids.end());
  for (size_t c = 0; c < 3; ++c) {
    CAPTURE(c);
    // The mean of 100 points with sigma 0.1: within 0.05 of the centre (5 standard errors).
    CHECK(std::hypot(result.centroids[c][0] - centres[c][0],
                     result.centroids[c][1] - centres[c][1]) < 0.05);
  }
  // The mean distance of 2-D normal jitter is sigma * sqrt(pi / 2) = 0.125 (not the mean
  // squared distance, 2 sigma^2 = 0.02).
  CHECK(std::fabs(result.mean_distance - 0.125) < 0.15 * 0.125);
}

TEST_CASE("search_anchors: clusters of label sizes become the anchors, sorted by area") {
  // Three kinds of objects, 10x10, 60x30 and 30x120 pixels, each size within +-10%.
  std::mt19937_64 generator(5);
  std::uniform_real_distribution<float> spread(0.9f, 1.1f);
  const std::vector<AnchorSize> kinds = {{10, 10}, {60, 30}, {30, 120}};  // sorted by area
  std::vector<AnchorSize> sizes;
  for (int i = 0; i < 240; ++i) {
    const AnchorSize& kind = kinds[size_t(i % 3)];
    sizes.push_back({kind[0] * spread(generator), kind[1] * spread(generator)});
  }
  const std::vector<AnchorSize> anchors =
      models::search_anchors(sizes, 3, 128, 4.0, 0, 50, [](const std::string&) {});
  REQUIRE(anchors.size() == 3);
  for (size_t k = 0; k < 3; ++k) {
    CAPTURE(k);
    // k-means puts each at its cluster's mean; the evolution may move it while every label
    // stays matched (fitness rewards closeness): within a factor 1.5 of the kind's size.
    CHECK(anchors[k][0] / kinds[k][0] == doctest::Approx(1).epsilon(0.5));
    CHECK(anchors[k][1] / kinds[k][1] == doctest::Approx(1).epsilon(0.5));
  }
  CHECK(models::anchor_fit(sizes, anchors, 4.0).best_possible_recall == 1);
  // All of it from the seed: the same again, another seed draws otherwise.
  CHECK(models::search_anchors(sizes, 3, 128, 4.0, 0, 50, [](const std::string&) {}) == anchors);
  CHECK(models::search_anchors(sizes, 3, 128, 4.0, 1, 50, [](const std::string&) {}) != anchors);
}

TEST_CASE("label sizes: pixels at imgsz, each image's random factor from the seed") {
  // 200x100 at imgsz 64: the image becomes 64x32, a 0.5 x 0.25 box 32x8 pixels.
  const data::Dataset dataset =
      records_dataset({{{200, 100}, {{0, 0.5f, 0.5f, 0.5f, 0.25f}, {0, 0.5f, 0.5f, 0.25f, 0.5f}}},
                       {{100, 400}, {{0, 0.5f, 0.5f, 0.5f, 0.5f}}}});
  const std::vector<AnchorSize> sizes = models::label_sizes(dataset, 64, false, 0);
  REQUIRE(sizes.size() == 3);
  CHECK(sizes[0] == AnchorSize{32, 8});
  CHECK(sizes[1] == AnchorSize{16, 16});
  CHECK(sizes[2] == AnchorSize{8, 32});  // 100x400 becomes 16x64
  const std::vector<AnchorSize> scaled = models::label_sizes(dataset, 64, true, 11);
  REQUIRE(scaled.size() == 3);
  const double first = scaled[0][0] / 32.0, second = scaled[2][0] / 8.0;
  CHECK(first >= 0.9);
  CHECK(first < 1.1);
  CHECK(second >= 0.9);
  CHECK(second < 1.1);
  CHECK(first != second);                                       // one factor per image ...
  CHECK(scaled[0][1] / 8.0 == doctest::Approx(first));          // ... for both sides
  CHECK(scaled[1][0] / 16.0 == doctest::Approx(first));         // ... and all its labels
  CHECK(models::label_sizes(dataset, 64, true, 11) == scaled);  // from the seed
  CHECK(models::label_sizes(dataset, 64, true, 12) != scaled);
}

TEST_CASE("AutoAnchor keeps anchors above 0.98 recall and searches at 0.95") {
  // Labels of 9 pixels (8.1 to 9.9 with the random factor) fit 9-pixel anchors, one of 60
  // pixels fits none (more than 4 times larger).
  std::vector<float> sides(99, 9.0f);
  sides.push_back(60);
  AnchorCheck good(9);
  CHECK_FALSE(good.run(square_labels(sides)));
  REQUIRE(good.lines.size() == 1);
  CHECK(good.lines[0] ==
        "AutoAnchor: 8.91 anchors/target, 0.990 Best Possible Recall (BPR). Current anchors are a "
        "good fit to dataset");
  CHECK(good.model.pixel_anchors()[2] == std::vector<double>(6, 9));

  sides.erase(sides.begin(), sides.begin() + 80);  // 19 of 20 fit: 0.95
  AnchorCheck poor(9);
  poor.run(square_labels(sides));
  REQUIRE(!poor.lines.empty());
  CHECK(poor.lines[0] ==
        "AutoAnchor: 8.55 anchors/target, 0.950 Best Possible Recall (BPR). Anchors are a poor "
        "fit to dataset, attempting to improve...");
}

TEST_CASE("AutoAnchor keeps the model's anchors when the new ones match fewer labels") {
  // 30 labels of 1.5 pixels fit the 3-pixel anchors; 10 of 36 to 44 pixels fit none. k-means
  // sees only labels of 2 pixels or more, so its anchors fit the 10 and none of the 30.
  std::vector<float> sides(30, 1.5f);
  for (int i = 0; i < 10; ++i) sides.push_back(36.0f + float(i) * 8 / 9);
  AnchorCheck check(3);
  CHECK_FALSE(check.run(square_labels(sides)));
  std::string log;
  for (const std::string& line : check.lines) log += line + "\n";
  INFO(log);
  REQUIRE(check.lines.size() == 4);
  CHECK(check.lines[0] ==
        "AutoAnchor: 6.75 anchors/target, 0.750 Best Possible Recall (BPR). Anchors are a poor "
        "fit to dataset, attempting to improve...");
  CHECK(check.lines[3] ==
        "AutoAnchor: the new anchors give 2.25 anchors/target, 0.250 Best Possible Recall (BPR): "
        "Done (original anchors better than new anchors, proceeding with original anchors)");
  CHECK(check.model.pixel_anchors()[0] == std::vector<double>(6, 3));
}

TEST_CASE(
    "the hyp file's anchors: rounded half to even into placeholders, refused when no "
    "whole number of them") {
  TempDir dir;
  models::TrainOptions options;
  options.cfg = shipped_file("models/yolov5-tiny.yaml");
  write_text(dir.path() / "hyp.yaml", "lr0: 0.01\nanchors: 3.412\n");
  models::load_hyp_yaml((dir.path() / "hyp.yaml").string(), options);
  CHECK(options.anchors == 3.412);
  models::ModelConfig config = models::run_model_config(options);
  CHECK(config.placeholder_anchors);
  CHECK(config.anchors[0] == std::vector<double>{0, 1, 2, 3, 4, 5});
  // hyp.yaml in the run directory gives it back, so that --hyp hyp.yaml asks for it again.
  CHECK(models::hyp_yaml_text(options).find("\nanchors: 3.412\n") != std::string::npos);
  options.anchors = 2.5;  // Python's round(2.5) is 2
  CHECK(models::run_model_config(options).anchors[0].size() == 4);

  write_text(dir.path() / "bad.yaml", "anchors: 0.3\n");
  models::TrainOptions refused;
  CHECK_THROWS_WITH_AS(models::load_hyp_yaml((dir.path() / "bad.yaml").string(), refused),
                       doctest::Contains("bad.yaml:1: anchors = 0.3 must be 0 (the model yaml's "
                                         "anchors) or a number of anchors per level that rounds "
                                         "to 1..16"),
                       std::invalid_argument);
  refused.anchors = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH_AS(models::check_hyp(refused), doctest::Contains("anchors = nan must be 0"),
                       std::invalid_argument);
}

TEST_CASE("placeholder anchors with --noautoanchor are refused before training") {
  TempDir dir;
  models::TrainOptions options = short_run(dir.path(), kPoorAnchors);
  options.anchors = 3;  // the hyp file's: placeholders
  options.autoanchor = false;
  CHECK_THROWS_WITH_AS(models::train(options, [](const std::string&) {}),
                       doctest::Contains("the model holds the placeholders of `anchors: N` (its "
                                         "yaml or the hyp file's), which only AutoAnchor turns "
                                         "into anchors, and --noautoanchor is given"),
                       std::invalid_argument);
}

TEST_CASE(
    "a run whose poor anchors AutoAnchor replaced predicts with the new ones after "
    "reload") {
  TempDir dir;
  const models::TrainOptions options = short_run(dir.path(), kPoorAnchors);
  std::string log;
  const models::TrainSummary summary =
      models::train(options, [&](const std::string& line) { log += line + "\n"; });
  REQUIRE(summary.finished);
  INFO(log);
  CHECK(log.find("AutoAnchor: 0.00 anchors/target, 0.000 Best Possible Recall (BPR). Anchors are "
                 "a poor fit to dataset, attempting to improve...") != std::string::npos);
  CHECK(log.find("AutoAnchor: the new anchors give ") != std::string::npos);
  CHECK(log.find(": Done, training with them") != std::string::npos);

  // final.safetensors as predict loads it: the model from the yaml the file carries, then its
  // state. Both hold the new anchors.
  const std::string final_weights = (dir.path() / "run" / "weights" / "final.safetensors").string();
  const SafetensorsFile file = SafetensorsFile::load(final_weights);
  const models::ModelConfig config = models::weights_model_config(file, final_weights, "");
  models::DetectionModel reloaded(config, {.nc = 2});
  models::load_state(file, reloaded.state(), final_weights);
  const std::vector<std::vector<double>> anchors = reloaded.pixel_anchors();
  CHECK(anchors == config.anchors);
  for (const std::vector<double>& level : anchors)
    for (double v : level) {
      CHECK(v >= 2);
      CHECK(v < 64);  // sizes of the labels, not the 300-pixel ones
    }

  // Decoded with raw outputs of 0 (sigmoid 1/2), a box's size is its anchor's, in pixels.
  const std::vector<Tensor>& head =
      reloaded.forward(Tensor::zeros({1, 3, 64, 64}, Device::cpu()), Mode::eval);
  std::vector<Tensor> zero_head;
  for (const Tensor& level : head) zero_head.push_back(Tensor::zeros(level.shape(), Device::cpu()));
  const std::vector<double> rows = models::decode_predictions(zero_head, reloaded).to_doubles();
  const int64_t cells = zero_head[0].shape().h * zero_head[0].shape().w, outputs = 2 + 5;
  for (int a = 0; a < 3; ++a) {  // row a * cells: anchor a's first cell of level P3
    CHECK(rows[size_t(a * cells * outputs + 2)] == doctest::Approx(anchors[0][size_t(2 * a)]));
    CHECK(rows[size_t(a * cells * outputs + 3)] == doctest::Approx(anchors[0][size_t(2 * a + 1)]));
  }
}

TEST_CASE("the hyp file's anchors: AutoAnchor's for a new run, which resumes with them") {
  TempDir dir;
  models::TrainOptions options = short_run(dir.path(), kPoorAnchors);
  options.anchors = 2;  // the yaml has 3 per level
  options.max_steps = 1;
  std::string log;
  models::train(options, [&](const std::string& line) { log += line + "\n"; });
  INFO(log);
  // The placeholders (0,1), (2,3) px per level match a few of the smallest labels only.
  CHECK(log.find("Best Possible Recall (BPR). Anchors are a poor fit to dataset") !=
        std::string::npos);
  CHECK(log.find("AutoAnchor: Running kmeans for 6 anchors") != std::string::npos);
  const std::string last = (dir.path() / "run" / "weights" / "last.safetensors").string();
  const SafetensorsFile stopped = SafetensorsFile::load(last);
  CHECK(stopped.record("model.24.anchors").shape == std::vector<int64_t>{3, 2, 2});

  // Resumed as `train --resume` asks (the hyp's anchors are not part of the saved
  // configuration): the checkpoint's yaml builds the 2-anchor model, its anchors restored.
  models::TrainOptions resume;
  resume.resume = last;
  resume.show_progress = false;
  const models::TrainSummary summary = models::train(resume, [](const std::string&) {});
  CHECK(summary.finished);
  // The finished run's last is stripped to fp16, which holds AutoAnchor's anchors exactly
  // (they are rounded to fp16 when set).
  const SafetensorsFile finished = SafetensorsFile::load(last);
  CHECK(finished.record("model.24.anchors").dtype == "F16");
  CHECK(finished.float_tensor("model.24.anchors").to_vector<float>() ==
        stopped.float_tensor("model.24.anchors").to_vector<float>());
}
