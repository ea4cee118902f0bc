// tests/unit/train_batches.cpp — the shapes of training batches (issue 55): --rect's canvases
// as YOLOv5 computes them, per global batch for any world size; --multi-scale's sizes (in
// range, the same for any world size) and shapes; a --multi-scale batch's input against
// PyTorch's resize; a rect batch letterboxed without mosaic; 2 ranks' micro-batches as the
// one-rank batch's shares, in pixels; and short --rect and --rect --multi-scale runs whose
// batches have the planned shapes.
#include <algorithm>
#include <cstring>
#include <set>

#include "data/loader.h"
#include "data/multi_scale.h"
#include "data/train_batches.h"
#include "engine/shipped_files.h"
#include "models/train/trainer.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// Images of known aspect ratios h/w; index: a .75, b 1.333, c .667, d 1, e .5625, f 2, g 1.25,
// h .333.
data::Dataset aspect_dataset() {
  return data::Dataset({{"a", 640, 480, {}},
                        {"b", 480, 640, {}},
                        {"c", 640, 427, {}},
                        {"d", 500, 500, {}},
                        {"e", 640, 360, {}},
                        {"f", 300, 600, {}},
                        {"g", 400, 500, {}},
                        {"h", 600, 200, {}}},
                       {"x"});
}

data::DistributedSampler rect_sampler(const data::Dataset& dataset, int batch, int world,
                                      int rank) {
  return data::DistributedSampler({.dataset_size = dataset.size(),
                                   .global_batch = batch,
                                   .world_size = world,
                                   .rank = rank,
                                   .shuffle = false,
                                   .order = data::training_order(dataset, true)});
}

std::vector<data::Step> rect_plan(const data::Dataset& dataset, int batch, int world, int rank,
                                  bool multi_scale = false, int64_t epoch = 0) {
  return data::training_plan(dataset, rect_sampler(dataset, batch, world, rank), epoch,
                             {.imgsz = 640, .rect = true, .multi_scale = multi_scale, .seed = 3});
}

}  // namespace

TEST_CASE("--rect: batches in aspect-ratio order with YOLOv5's training canvases (pad 0)") {
  const data::Dataset dataset = aspect_dataset();
  const std::vector<data::Step> plan = rect_plan(dataset, 2, 1, 0);
  REQUIRE(plan.size() == 4);
  // Sorted by h/w: h e | c a | d g | b f. Canvas sides ceil(shape * 640 / 32) * 32.
  CHECK(plan[0].indices == std::vector<int64_t>{7, 4});
  CHECK(plan[0].width == 640);
  CHECK(plan[0].height == 384);  // all wide, max ar .5625: ceil(11.25) * 32
  CHECK(plan[1].indices == std::vector<int64_t>{2, 0});
  CHECK(plan[1].height == 480);  // max ar .75: 15 * 32 exactly
  CHECK(plan[2].indices == std::vector<int64_t>{3, 6});
  CHECK((plan[2].width == 640 && plan[2].height == 640));  // ar 1 and 1.25: square
  CHECK(plan[3].indices == std::vector<int64_t>{1, 5});
  CHECK((plan[3].width == 480 && plan[3].height == 640));  // all tall, min ar 4/3: 640 * 3/4
  for (const data::Step& step : plan) CHECK(step.input_width == 0);  // no --multi-scale

  // The same epoch after epoch (no shuffle), and validation's pad 0.5 is not training's.
  CHECK(rect_plan(dataset, 2, 1, 0, false, 5)[1].indices == plan[1].indices);
}

TEST_CASE("--rect: images that pad the last batch take no part in its canvas") {
  // e .5625, g 1.25, f 2 in batches of 2: e g | f + e repeated. YOLOv5's last batch is f alone.
  const data::Dataset dataset({{"e", 640, 360, {}}, {"f", 300, 600, {}}, {"g", 400, 500, {}}},
                              {"x"});
  const std::vector<data::Step> plan = rect_plan(dataset, 2, 1, 0);
  REQUIRE(plan.size() == 2);
  CHECK((plan[0].width == 640 && plan[0].height == 640));
  CHECK(plan[1].indices == std::vector<int64_t>{1, 0});
  CHECK((plan[1].width == 320 && plan[1].height == 640));  // f's 1/2 alone; with e: square
}

TEST_CASE("--rect --multi-scale: 2 and 4 ranks' steps are shares of the one-rank batch, alike") {
  const data::Dataset dataset = aspect_dataset();
  for (bool multi_scale : {false, true}) {
    CAPTURE(multi_scale);
    const std::vector<data::Step> single = rect_plan(dataset, 4, 1, 0, multi_scale, 2);
    for (int world : {2, 4})
      for (int rank = 0; rank < world; ++rank) {
        CAPTURE(world);
        CAPTURE(rank);
        const std::vector<data::Step> mine = rect_plan(dataset, 4, world, rank, multi_scale, 2);
        REQUIRE(mine.size() == single.size());
        const int share = 4 / world;
        for (size_t t = 0; t < mine.size(); ++t) {
          CHECK(mine[t].indices ==
                std::vector<int64_t>(single[t].indices.begin() + rank * share,
                                     single[t].indices.begin() + (rank + 1) * share));
          CHECK(mine[t].width == single[t].width);
          CHECK(mine[t].height == single[t].height);
          CHECK(mine[t].input_width == single[t].input_width);
          CHECK(mine[t].input_height == single[t].input_height);
        }
      }
  }
  // h e c a: all wide, max ar .75 -> 640 x 480; d g b f: mixed -> square.
  const std::vector<data::Step> plan = rect_plan(dataset, 4, 1, 0);
  CHECK((plan[0].width == 640 && plan[0].height == 480));
  CHECK((plan[1].width == 640 && plan[1].height == 640));
}

TEST_CASE("--multi-scale: YOLOv5's sizes, every stride multiple from imgsz/2 to 3 imgsz/2") {
  // randrange(320, 960 + 32) // 32 * 32 gives 320 ... 960; randrange(48, 144 + 32) gives 32 ...
  // 160 (48 .. 63 round down to 32).
  CHECK(data::multi_scale_range(640, 32).smallest == 320);
  CHECK(data::multi_scale_range(640, 32).largest == 960);
  CHECK(data::multi_scale_range(96, 32).smallest == 32);
  CHECK(data::multi_scale_range(96, 32).largest == 160);
  std::set<int> seen;
  for (int64_t iteration = 0; iteration < 1000; ++iteration) {
    const int size = data::multi_scale_size(7, iteration, 640, 32);
    CHECK(size % 32 == 0);
    CHECK(size >= 320);
    CHECK(size <= 960);
    seen.insert(size);
  }
  CHECK(seen.size() == 21);  // (960 - 320) / 32 + 1: each is drawn
  // A function of (seed, iteration) alone: again on a resume, another with another seed.
  CHECK(data::multi_scale_size(7, 123, 640, 32) == data::multi_scale_size(7, 123, 640, 32));
  int differs = 0;
  for (int64_t iteration = 0; iteration < 20; ++iteration)
    differs += data::multi_scale_size(7, iteration, 640, 32) !=
               data::multi_scale_size(8, iteration, 640, 32);
  CHECK(differs > 10);
}

TEST_CASE("--multi-scale: one size per global step of the run, the same on every rank") {
  const data::Dataset dataset = aspect_dataset();
  for (int64_t epoch : {0, 3}) {
    const std::vector<data::Step> single = rect_plan(dataset, 2, 1, 0, true, epoch);
    const std::vector<data::Step> rank1 = rect_plan(dataset, 2, 2, 1, true, epoch);
    for (size_t t = 0; t < single.size(); ++t) {
      const int size = data::multi_scale_size(3, epoch * 4 + int64_t(t), 640, 32);
      CHECK(std::max(single[t].input_width, single[t].input_height) == size);
      CHECK(rank1[t].input_width == single[t].input_width);
      CHECK(rank1[t].input_height == single[t].input_height);
    }
  }
}

TEST_CASE("--multi-scale: the batch's long side becomes the size, each side a stride multiple") {
  // Hand-computed: 480 x 352 / 640 = 264 -> ceil(8.25) * 32 = 288.
  CHECK(data::multi_scale_shape({640, 480}, 352, 32).width == 352);
  CHECK(data::multi_scale_shape({640, 480}, 352, 32).height == 288);
  CHECK(data::multi_scale_shape({480, 640}, 352, 32).width == 288);
  CHECK(data::multi_scale_shape({640, 360}, 416, 32).height == 256);  // 234 -> ceil(7.31) * 32
  CHECK(data::multi_scale_shape({640, 640}, 640, 32).width == 640);
  // YOLOv5 computes side * (size / longer) / stride in doubles: 608 * (672 / 608) / 32 is
  // 21.000000000000004, so its ceil gives 704, not 672 (python3 -c "import math;
  // print(math.ceil(608 * (672 / 608) / 32) * 32)"); so do we.
  CHECK(data::multi_scale_shape({608, 608}, 672, 32).width == 704);
}

TEST_CASE("a --multi-scale batch keeps its bytes and is resized as the model's input") {
  data::Sample sample;
  sample.image = data::Image(4, 3, 0);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c)
      std::fill(sample.image.at(c, r), sample.image.at(c, r) + 3,
                uint8_t((4 * r + c) * (4 * r + c)));
  sample.labels = {{1, 0.25f, 0.5f, 0.2f, 0.4f}};
  std::vector<data::Sample> samples = {sample};
  data::Step step;
  step.width = 4, step.height = 3, step.input_width = 7, step.input_height = 5;
  const data::Batch batch = data::collate(step, samples);
  REQUIRE((batch.width == 4 && batch.height == 3));
  REQUIRE((batch.input_width == 7 && batch.input_height == 5));
  CHECK(std::memcmp(batch.image(0), sample.image.pixels.data(), batch.image_bytes()) == 0);
  // The plane (4 r + c)^2 / 100 resized to 7 x 5 by torch 1.13's F.interpolate(mode='bilinear',
  // align_corners=False) holds 0.079 at 8 and 1.21 at 34 (tests/unit/input_images.cpp): in
  // bytes / 255, those x 100 / 255, in each of the 3 channels.
  const std::vector<float> input = batch.images_tensor().to_vector<float>();
  REQUIRE(input.size() == 3 * 35);
  for (int channel = 0; channel < 3; ++channel) {
    const float* plane = input.data() + channel * 35;
    CHECK(plane[8] == doctest::Approx(0.079 * 100 / 255).scale(0).epsilon(1e-5));
    CHECK(plane[34] == doctest::Approx(1.21 * 100 / 255).scale(0).epsilon(1e-5));
  }
  CHECK(batch.targets == std::vector<float>{0, 1, 0.25f, 0.5f, 0.2f, 0.4f});
}

TEST_CASE("--rect: training samples are letterboxed into the batch's canvas, never a mosaic") {
  TempDir dir;
  const data::OpenedSplit train =
      data::open_split(data::read_dataset_yaml(make_box_dataset(dir.path(), 6)), "train");
  data::DistributedSampler sampler({.dataset_size = train.dataset.size(),
                                    .global_batch = 3,
                                    .shuffle = false,
                                    .order = data::training_order(train.dataset, true)});
  const std::vector<data::Step> plan =
      data::training_plan(train.dataset, sampler, 0, {.imgsz = 128, .rect = true});
  REQUIRE(plan.size() == 2);
  // Ratios .571 .577 .708 | .727 .75 .85: canvases 128 x ceil(.708 * 4) * 32 and 128 x 128.
  CHECK((plan[0].width == 128 && plan[0].height == 96));
  CHECK(plan[1].height == 128);
  // Mosaic always, every other augmentation off: what comes out is the letterbox alone, as
  // validation builds it into the same canvas.
  data::AugmentHyp neutral{
      .hsv_h = 0, .hsv_s = 0, .hsv_v = 0, .translate = 0, .scale = 0, .fliplr = 0, .mosaic = 1};
  data::Loader trained(train.dataset, plan, 0,
                       {.imgsz = 128, .augment = true, .hyp = neutral, .rect = true});
  data::LoaderOptions validation;
  validation.imgsz = 128, validation.augment = false;
  data::Loader letterboxed(train.dataset, plan, 0, validation);
  int batches = 0;
  while (std::optional<data::Batch> batch = trained.next()) {
    const data::Batch reference = *letterboxed.next();
    const data::Step& step = plan[size_t(batches++)];
    CHECK((batch->width == step.width && batch->height == step.height));
    CHECK(std::memcmp(batch->images.get(), reference.images.get(),
                      batch->image_bytes() * size_t(batch->size)) == 0);
    REQUIRE(batch->targets.size() == reference.targets.size());
    for (size_t i = 0; i < batch->targets.size(); ++i)
      CHECK(batch->targets[i] == doctest::Approx(reference.targets[i]).epsilon(1e-4));
  }
  CHECK(batches == 2);
}

TEST_CASE("train --rect and --rect --multi-scale: the tiny model trains on the planned shapes") {
  TempDir dir;
  // Two wide and two tall images: at 128 px in batches of 2, canvases 128 x 96 and 96 x 128.
  add_image(dir.path(), "train", "w1", 256, 128, {{0, 0.3f, 0.5f, 0.2f, 0.4f}});
  add_image(dir.path(), "train", "w2", 256, 192, {{1, 0.6f, 0.4f, 0.3f, 0.3f}});
  add_image(dir.path(), "train", "t1", 128, 256, {{0, 0.5f, 0.3f, 0.4f, 0.2f}});
  add_image(dir.path(), "train", "t2", 192, 256, {{1, 0.4f, 0.6f, 0.3f, 0.3f}});
  add_image(dir.path(), "val", "v1", 256, 128, {{0, 0.3f, 0.5f, 0.2f, 0.4f}});
  for (bool multi_scale : {false, true}) {
    CAPTURE(multi_scale);
    models::TrainOptions options;
    options.data = write_yaml(dir.path(), 2);
    options.cfg = shipped_file("models/yolov5-tiny.yaml");
    options.epochs = 1, options.batch = 2, options.imgsz = 128, options.workers = 1;
    options.rect = true, options.multi_scale = multi_scale, options.seed = 4;
    options.show_progress = false, options.plots = false, options.tensorboard = false;
    options.run_dir = (dir.path() / (multi_scale ? "multi" : "rect")).string();
    std::vector<data::ImageSize> shapes;
    models::TrainCallbacks record;
    record.on_train_batch_end = [&](const models::BatchEndInfo& info) {
      shapes.push_back({info.batch->input_width, info.batch->input_height});
    };
    options.callbacks = {record};
    const models::TrainSummary summary = models::train(options, [](const std::string&) {});
    CHECK(summary.finished);
    REQUIRE(shapes.size() == 2);
    const data::ImageSize canvases[2] = {{128, 96}, {96, 128}};
    for (int t = 0; t < 2; ++t) {
      const data::ImageSize want =
          multi_scale
              ? data::multi_scale_shape(canvases[t], data::multi_scale_size(4, t, 128, 32), 32)
              : canvases[t];
      CHECK(shapes[size_t(t)].width == want.width);
      CHECK(shapes[size_t(t)].height == want.height);
    }
  }
}

// With the default augmentation (HSV, flips, perspective): each rank's micro-batch of step t is
// its share of the one-rank batch, bit for bit, to be resized to the same size.
TEST_CASE("--rect --multi-scale: 2 ranks' micro-batches are the one-rank batch in pixels") {
  TempDir dir;
  const data::OpenedSplit train =
      data::open_split(data::read_dataset_yaml(make_box_dataset(dir.path(), 16, 2)), "train");
  auto load = [&](int world, int rank) {
    data::DistributedSampler sampler({.dataset_size = train.dataset.size(),
                                      .global_batch = 8,
                                      .world_size = world,
                                      .rank = rank,
                                      .shuffle = false,
                                      .order = data::training_order(train.dataset, true)});
    const data::TrainBatchOptions shapes{.imgsz = 128, .rect = true, .multi_scale = true};
    data::Loader loader(train.dataset, data::training_plan(train.dataset, sampler, 1, shapes), 1,
                        {.imgsz = 128, .augment = true, .hyp = {}, .rect = true, .workers = 1});
    std::vector<data::Batch> batches;
    while (std::optional<data::Batch> batch = loader.next()) batches.push_back(std::move(*batch));
    return batches;
  };
  const std::vector<data::Batch> single = load(1, 0);
  REQUIRE(single.size() == 2);
  for (int rank = 0; rank < 2; ++rank) {
    const std::vector<data::Batch> mine = load(2, rank);
    REQUIRE(mine.size() == 2);
    for (size_t t = 0; t < 2; ++t) {
      REQUIRE((mine[t].width == single[t].width && mine[t].height == single[t].height));
      CHECK((mine[t].input_width == single[t].input_width &&
             mine[t].input_height == single[t].input_height));
      CHECK(std::memcmp(mine[t].images.get(), single[t].image(rank * 4),
                        mine[t].image_bytes() * 4) == 0);
    }
  }
}
