// tests/unit/train_pictures.cpp — a 3-epoch tiny run leaves YOLOv5's pictures in its run
// directory, each a decodable image that is not blank and embedded in report.html, and
// --noplots leaves none.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "data/image.h"
#include "data/shapes.h"
#include "engine/shipped_files.h"
#include "models/train/trainer.h"
#include "tests/support/testing.h"

using namespace bareyolo;
namespace fs = std::filesystem;

namespace {

const char* const kPictures[] = {
    "results.png",        "confusion_matrix.png", "PR_curve.png",     "F1_curve.png",
    "P_curve.png",        "R_curve.png",          "labels.jpg",       "labels_correlogram.jpg",
    "train_batch0.jpg",   "train_batch1.jpg",     "train_batch2.jpg", "val_batch0_labels.jpg",
    "val_batch0_pred.jpg"};

// The standard deviation of all channel values: 0 for a blank picture.
double pixel_spread(const data::Image& image) {
  double sum = 0, squares = 0;
  for (uint8_t v : image.pixels) sum += v, squares += double(v) * v;
  const double n = double(image.pixels.size()), mean = sum / n;
  return std::sqrt(std::max(0.0, squares / n - mean * mean));
}

models::TrainOptions tiny_run(const fs::path& root, const std::string& run, int epochs) {
  models::TrainOptions options;
  options.data = (root / "shapes" / "data.yaml").string();
  options.cfg = shipped_file("models/yolov5-tiny.yaml");
  options.epochs = epochs;
  options.batch = 4;
  options.imgsz = 64;
  options.workers = 1;
  options.show_progress = false;
  options.run_dir = (root / run).string();
  return options;
}

}  // namespace

TEST_CASE("train pictures: a 3-epoch run draws each picture and --noplots none") {
  const fs::path root =
      fs::temp_directory_path() / ("bareyolo-pictures-" + std::to_string(::getpid()));
  fs::remove_all(root);
  data::make_shapes_dataset({.out = (root / "shapes").string(),
                             .n_train = 16,
                             .n_val = 4,
                             .imgsz = 64,
                             .classes = 2,
                             .seed = 0});
  auto quiet = [](const std::string&) {};
  models::train(tiny_run(root, "run", 3), quiet);
  for (const char* name : kPictures) {
    CAPTURE(name);
    const fs::path path = root / "run" / name;
    REQUIRE(fs::exists(path));
    const data::Image image = data::read_image(path.string());
    CHECK(image.width >= 64);
    CHECK(pixel_spread(image) > 10);
  }
  CHECK_FALSE(fs::exists(root / "run" / "train_batch3.jpg"));  // three, as YOLOv5
  std::ifstream report(root / "run" / "report.html");
  const std::string html((std::istreambuf_iterator<char>(report)), {});
  for (const char* name : kPictures)
    CHECK_MESSAGE(
        html.find("<img alt=\"" + std::string(name) + "\" src=\"data:image/") != std::string::npos,
        "report.html does not embed " << name);

  models::TrainOptions no_plots = tiny_run(root, "quiet", 1);
  no_plots.plots = false;
  models::train(no_plots, quiet);
  for (const char* name : kPictures) CHECK_MESSAGE(!fs::exists(root / "quiet" / name), name);
  fs::remove_all(root);
}
