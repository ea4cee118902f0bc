// tests/datasets/coco128.cpp — the data pipeline on real photographs (COCO128): the
// verification counts `bareyolo data-check` prints, image sizes and box counts against the
// dataset's manifest, the grayscale JPEG, one loader epoch at 320 with two workers, and
// validation's mapping of labels and detections through the photographs' rectangular batches.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "data/dataset.h"
#include "data/image.h"
#include "data/label_cache.h"
#include "data/loader.h"
#include "models/eval/validate.h"
#include "tests/datasets/datasets_testing.h"
#include "tests/support/validation_oracle.h"

using namespace bareyolo;

namespace {

std::filesystem::path coco128() { return testing::shared_datasets() / "coco128"; }

}  // namespace

TEST_CASE("coco128: data-check reports the true counts and no problem") {
  data::DatasetConfig config = data::read_dataset_yaml((coco128() / "data.yaml").string());
  CHECK(config.num_classes() == 80);
  CHECK(config.names[9] == "traffic light");
  data::CachedSplit train = data::load_or_build_split(config.train, 80);
  data::CachedSplit val = data::load_or_build_split(config.val, 80);
  CHECK(train.report.summary() == "103 images, 2 backgrounds, 0 corrupt, 817 labels");
  CHECK(val.report.summary() == "25 images, 0 backgrounds, 0 corrupt, 112 labels");
  CHECK(train.report.problems.empty());
  CHECK(val.report.problems.empty());
  // The second time it comes from the cache, with the same content.
  data::CachedSplit again = data::load_or_build_split(config.train, 80);
  CHECK(again.from_cache);
  CHECK(again.report.summary() == train.report.summary());
}

TEST_CASE("coco128: every image's size and box count match the manifest") {
  data::DatasetConfig config = data::read_dataset_yaml((coco128() / "data.yaml").string());
  std::map<std::string, std::tuple<int, int, size_t>> manifest;  // stem -> w, h, boxes
  std::ifstream in(coco128() / "MANIFEST.tsv");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string split, stem;
    int width, height;
    size_t boxes;
    fields >> split >> stem >> width >> height >> boxes;
    manifest[stem] = {width, height, boxes};
  }
  REQUIRE(manifest.size() == 128);
  size_t seen = 0;
  for (const char* split : {"train", "val"}) {
    data::OpenedSplit opened = data::open_split(config, split);
    for (const data::ImageRecord& record : opened.dataset.records()) {
      std::string stem = std::filesystem::path(record.path).stem().string();
      REQUIRE(manifest.count(stem) == 1);
      auto [width, height, boxes] = manifest[stem];
      CHECK(record.width == width);
      CHECK(record.height == height);
      CHECK(record.boxes.size() == boxes);
      ++seen;
    }
  }
  CHECK(seen == 128);
}

TEST_CASE("coco128: the grayscale JPEG decodes to three equal channels") {
  data::Image image = data::read_image((coco128() / "images/train/000000000086.jpg").string());
  CHECK(image.width == 512);
  CHECK(image.height == 640);
  bool gray = true;
  for (size_t i = 0; i < image.pixels.size(); i += 3)
    gray = gray && image.pixels[i] == image.pixels[i + 1] && image.pixels[i] == image.pixels[i + 2];
  CHECK(gray);
}

TEST_CASE("coco128: one epoch of 320 mosaics with two workers") {
  data::DatasetConfig config = data::read_dataset_yaml((coco128() / "data.yaml").string());
  data::OpenedSplit train = data::open_split(config, "train");
  data::SamplerOptions sampler;
  sampler.dataset_size = train.dataset.size();
  sampler.global_batch = 16;
  data::LoaderOptions options;
  options.imgsz = 320;
  options.workers = 2;
  data::Loader loader(train.dataset, data::DistributedSampler(sampler).plan_epoch(0, 320), 0,
                      options);
  int64_t steps = 0, targets = 0;
  while (std::optional<data::Batch> batch = loader.next()) {
    CHECK(batch->size == 16);
    CHECK(batch->width == 320);
    for (int64_t t = 0; t < batch->num_targets(); ++t)
      CHECK(batch->targets[size_t(t * 6 + 1)] < 80);
    targets += batch->num_targets();
    ++steps;
  }
  CHECK(steps == 7);     // 103 images padded to 112
  CHECK(targets > 500);  // mosaics of ~8 boxes per image, some cut away
}

TEST_CASE("coco128: an oracle scores 0.995 through rectangular batches of photographs") {
  // 640 x 480 and other shapes at 320 with rect: canvases wider than high, where the labels'
  // heights and the detections' must both be scaled by the canvas height.
  data::DatasetConfig config = data::read_dataset_yaml((coco128() / "data.yaml").string());
  const data::OpenedSplit split = data::open_split(config, "val");
  models::ValidationOptions options;
  options.batch = 8;
  options.imgsz = 320;
  options.rect = true;
  const models::ValidationResult result =
      models::validate(split.dataset, options, testing::validation_oracle(0, 80), 32);
  CHECK(result.images == 25);
  CHECK(result.labels == 112);
  CHECK(result.metrics.map50 == doctest::Approx(0.995));
  CHECK(result.metrics.map50_95 == doctest::Approx(0.995));
}
