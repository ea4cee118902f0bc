// tests/unit/loader.cpp — the threaded loader: batches identical for any worker count
// and any world size (N ranks' micro-batches == the single-rank batch, pixels and targets;
// with mixup and copy-paste on too, on box and polygon labels),
// distinct augmentations for repeated images, epochs and seeds, the collate layout, validation
// metadata, and errors from workers reaching the caller; a target matcher run on the workers for
// every batch; one loader of several epochs gives what a loader per epoch gives, building ahead
// across ends.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "data/loader.h"
#include "data/val_batches.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// hyp.scratch-low with up-down flips, so that both flips are exercised.
data::AugmentHyp flipping_hyp() {
  data::AugmentHyp hyp;
  hyp.flipud = 0.5;
  return hyp;
}

// The same with hyp.scratch-high's mixup and copy-paste, made certain.
data::AugmentHyp mixing_hyp() {
  data::AugmentHyp hyp = flipping_hyp();
  hyp.mixup = hyp.copy_paste = 1;
  return hyp;
}

std::vector<data::Batch> load_epoch(const data::Dataset& dataset, int global_batch, int world,
                                    int rank, int workers, int64_t epoch = 1,
                                    const data::AugmentHyp& hyp = flipping_hyp(),
                                    uint64_t seed = 5) {
  data::SamplerOptions sampler;
  sampler.dataset_size = dataset.size();
  sampler.global_batch = global_batch;
  sampler.world_size = world;
  sampler.rank = rank;
  sampler.seed = seed;
  data::LoaderOptions options;
  options.imgsz = 96;
  options.seed = seed;
  options.workers = workers;
  options.hyp = hyp;
  data::Loader loader(dataset, data::DistributedSampler(sampler).plan_epoch(epoch, 96), epoch,
                      options);
  std::vector<data::Batch> batches;
  while (std::optional<data::Batch> batch = loader.next()) batches.push_back(std::move(*batch));
  return batches;
}

bool same_image(const data::Batch& a, int i, const data::Batch& b, int j) {
  return std::memcmp(a.image(i), b.image(j), a.image_bytes()) == 0;
}

// Target rows of image i, without the image index column.
std::vector<float> targets_of(const data::Batch& batch, int i) {
  std::vector<float> rows;
  for (int64_t t = 0; t < batch.num_targets(); ++t)
    if (batch.targets[size_t(t * 6)] == float(i))
      rows.insert(rows.end(), batch.targets.begin() + t * 6 + 1, batch.targets.begin() + t * 6 + 6);
  return rows;
}

// Every batch of an epoch built with 1 and 3 workers is the one built inline.
void check_worker_counts_agree(const data::Dataset& dataset, const data::AugmentHyp& hyp) {
  std::vector<data::Batch> inline_built = load_epoch(dataset, 4, 1, 0, 0, 1, hyp);
  REQUIRE(inline_built.size() == 3);  // 11 images, batch 4: the last batch is padded
  for (int workers : {1, 3}) {
    std::vector<data::Batch> threaded = load_epoch(dataset, 4, 1, 0, workers, 1, hyp);
    REQUIRE(threaded.size() == inline_built.size());
    for (size_t s = 0; s < threaded.size(); ++s) {
      CHECK(threaded[s].step == int64_t(s));
      CHECK(threaded[s].targets == inline_built[s].targets);
      for (int i = 0; i < 4; ++i) CHECK(same_image(threaded[s], i, inline_built[s], i));
    }
  }
}

// 2 and 4 ranks' micro-batches of every step, put together, are the single-rank batch.
void check_world_sizes_agree(const data::Dataset& dataset, const data::AugmentHyp& hyp) {
  std::vector<data::Batch> single = load_epoch(dataset, 4, 1, 0, 2, 1, hyp);
  for (int world : {2, 4}) {
    int share = 4 / world;
    for (int rank = 0; rank < world; ++rank) {
      std::vector<data::Batch> mine = load_epoch(dataset, 4, world, rank, 1, 1, hyp);
      REQUIRE(mine.size() == single.size());
      for (size_t s = 0; s < single.size(); ++s)
        for (int i = 0; i < share; ++i) {
          int global_i = rank * share + i;
          CHECK(same_image(mine[s], i, single[s], global_i));
          CHECK(targets_of(mine[s], i) == targets_of(single[s], global_i));
          CHECK(mine[s].meta[size_t(i)].path == single[s].meta[size_t(global_i)].path);
        }
    }
  }
}

}  // namespace

TEST_CASE("loader: batches are identical for 0 or 1 or 3 workers") {
  TempDir dir;
  data::OpenedSplit train =
      data::open_split(data::read_dataset_yaml(make_box_dataset(dir.path(), 11)), "train");
  check_worker_counts_agree(train.dataset, flipping_hyp());
}

TEST_CASE(
    "loader: 2 and 4 ranks' micro-batches together are the single-rank batch in pixels and "
    "targets") {
  TempDir dir;
  data::OpenedSplit train =
      data::open_split(data::read_dataset_yaml(make_box_dataset(dir.path(), 7)), "train");
  check_world_sizes_agree(train.dataset, flipping_hyp());
}

TEST_CASE("loader: with mixup and copy-paste the batches do not depend on workers or ranks") {
  TempDir dir;
  for (const bool polygons : {false, true}) {
    CAPTURE(polygons);
    const fs::path root = dir.path() / (polygons ? "polygons" : "boxes");
    data::OpenedSplit train =
        data::open_split(data::read_dataset_yaml(polygons ? make_polygon_dataset(root, 11)
                                                          : make_box_dataset(root, 11)),
                         "train");
    check_worker_counts_agree(train.dataset, mixing_hyp());
    check_world_sizes_agree(train.dataset, mixing_hyp());
    // And mixup and copy-paste did their part: more targets than without them.
    const auto targets = [&](const data::AugmentHyp& hyp) {
      int64_t count = 0;
      for (const data::Batch& batch : load_epoch(train.dataset, 4, 1, 0, 0, 1, hyp))
        count += batch.num_targets();
      return count;
    };
    CHECK(targets(mixing_hyp()) > targets(flipping_hyp()) * 3 / 2);
  }
}

TEST_CASE("loader: an image's augmentation differs by position, by epoch and by --seed") {
  TempDir dir;
  data::OpenedSplit train =
      data::open_split(data::read_dataset_yaml(make_box_dataset(dir.path(), 1)), "train");
  std::vector<data::Batch> batches = load_epoch(train.dataset, 4, 1, 0, 0);  // 1 image, padded to 4
  REQUIRE(batches.size() == 1);
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j) CHECK_FALSE(same_image(batches[0], i, batches[0], j));
  // And a different epoch changes them too, and so does another seed (one image: the same order).
  CHECK_FALSE(same_image(batches[0], 0, load_epoch(train.dataset, 4, 1, 0, 0, 2)[0], 0));
  CHECK_FALSE(
      same_image(batches[0], 0, load_epoch(train.dataset, 4, 1, 0, 0, 1, flipping_hyp(), 6)[0], 0));
}

TEST_CASE("loader: collate layout is HWC bytes and target rows of image class cx cy w h") {
  TempDir dir;
  data::OpenedSplit train =
      data::open_split(data::read_dataset_yaml(make_box_dataset(dir.path(), 5)), "train");
  data::Batch batch = std::move(load_epoch(train.dataset, 4, 1, 0, 0)[0]);
  CHECK(batch.size == 4);
  CHECK(batch.height == 96);
  CHECK(batch.width == 96);
  CHECK((batch.input_height == 96 && batch.input_width == 96));
  CHECK(batch.image_bytes() == 96 * 96 * 3);
  CHECK(reinterpret_cast<uintptr_t>(batch.images.get()) % 64 == 0);
  REQUIRE(batch.num_targets() > 0);
  for (int64_t t = 0; t < batch.num_targets(); ++t) {
    const float* row = batch.targets.data() + t * 6;
    CHECK(row[0] >= 0);
    CHECK(row[0] < 4);
    CHECK(row[1] < 3);
    for (int k = 2; k < 6; ++k) CHECK((row[k] >= 0 && row[k] <= 1));
  }
}

TEST_CASE("loader: validation letterboxes and records how to map boxes back") {
  TempDir dir;
  data::OpenedSplit val =
      data::open_split(data::read_dataset_yaml(make_box_dataset(dir.path(), 2)), "val");
  data::ValBatchOptions plan_options;
  plan_options.batch = 2;
  plan_options.imgsz = 64;
  data::LoaderOptions options;
  options.imgsz = 64;
  options.augment = false;
  data::Loader loader(val.dataset, data::validation_plan(val.dataset, plan_options), 0, options);
  data::Batch batch = *loader.next();
  CHECK_FALSE(loader.next().has_value());
  REQUIRE(batch.size == 2);
  const data::ImageMeta& wide = batch.meta[0];  // v0: 200 x 100 -> 64 x 32 in a 64 x 64 canvas
  CHECK(wide.letterboxed);
  CHECK(wide.original_width == 200);
  CHECK(wide.gain_x == doctest::Approx(0.32));
  CHECK(wide.pad_y == doctest::Approx(16));
  // v0's label (0.5, 0.5, 0.4, 0.4) in the letterboxed image.
  REQUIRE(batch.num_targets() == 2);
  CHECK(batch.targets[2] == doctest::Approx(0.5));
  CHECK(batch.targets[4] == doctest::Approx(0.4));
  CHECK(batch.targets[5] == doctest::Approx(0.2));
  // v1: 90 x 180 -> 32 x 64, padded left and right; its label (0.5, 0.5, 0.3, 0.2) stays centred.
  const data::ImageMeta& tall = batch.meta[1];
  CHECK(tall.pad_x == doctest::Approx(16));
  CHECK(batch.targets[8] == doctest::Approx(0.5));
  CHECK(batch.targets[10] == doctest::Approx(0.15));
}

TEST_CASE("loader: an image that disappeared after verification is an error naming it") {
  TempDir dir;
  data::OpenedSplit train =
      data::open_split(data::read_dataset_yaml(make_box_dataset(dir.path(), 4)), "train");
  for (const auto& entry : fs::directory_iterator(dir.path() / "images" / "train"))
    fs::remove(entry.path());
  CHECK_THROWS_WITH_AS(load_epoch(train.dataset, 2, 1, 0, 2),
                       doctest::Contains("cannot open image"), data::ImageError);
}

TEST_CASE("loader: a target matcher gives every batch its matched targets, on worker threads") {
  TempDir dir;
  data::OpenedSplit train =
      data::open_split(data::read_dataset_yaml(make_box_dataset(dir.path(), 7)), "train");
  // A stand-in for the trainer's TargetMatcher: one row per label, carrying its image and class,
  // on a grid named after the input size; it records the threads it ran on.
  std::mutex mutex;
  std::set<std::thread::id> threads;
  auto matcher = [&](const data::Batch& batch) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      threads.insert(std::this_thread::get_id());
    }
    data::MatchedTargets matched;
    matched.grids = {{batch.input_height, batch.input_width}};
    matched.levels.resize(1);
    for (const data::LabelRow& label : batch.labels())
      matched.levels[0].push_back(
          {label.image, 0, 0, 0, label.cx, label.cy, label.w, label.h, 1, 1, label.class_id});
    return matched;
  };
  for (int workers : {0, 2}) {
    CAPTURE(workers);
    threads.clear();
    data::SamplerOptions sampler;
    sampler.dataset_size = train.dataset.size();
    sampler.global_batch = 2;
    data::LoaderOptions options;
    options.imgsz = 96;
    options.workers = workers;
    options.match_targets = matcher;
    data::Loader loader(train.dataset, data::DistributedSampler(sampler).plan_epoch(0, 96), 0,
                        options);
    int batches = 0;
    while (std::optional<data::Batch> batch = loader.next()) {
      ++batches;
      REQUIRE(batch->matched.has_value());
      CHECK(batch->matched->grids == std::vector<std::array<int, 2>>{{96, 96}});
      const std::vector<data::MatchedRow>& rows = batch->matched->levels.at(0);
      REQUIRE(int64_t(rows.size()) == batch->num_targets());
      for (int64_t r = 0; r < batch->num_targets(); ++r) {
        CHECK(rows[size_t(r)].image == batch->label(r).image);
        CHECK(rows[size_t(r)].class_id == batch->label(r).class_id);
        CHECK(rows[size_t(r)].tw == double(batch->label(r).w));
      }
    }
    CHECK(batches == 4);  // 7 images, batch 2
    CHECK(threads.count(std::this_thread::get_id()) == size_t(workers == 0 ? 1 : 0));
  }
}

TEST_CASE("loader: one loader of several epochs gives each epoch's batches and builds ahead") {
  TempDir dir;
  data::OpenedSplit train =
      data::open_split(data::read_dataset_yaml(make_box_dataset(dir.path(), 7)), "train");
  data::SamplerOptions sampler_options;
  sampler_options.dataset_size = train.dataset.size();
  sampler_options.global_batch = 2;
  sampler_options.seed = 5;
  const data::DistributedSampler sampler(sampler_options);
  // Epochs 1..3, the first resumed after its first batch, as the trainer's loader.
  auto plan = [&](int64_t epoch) {
    std::vector<data::Step> steps = sampler.plan_epoch(epoch, 96);
    if (epoch == 1) steps.erase(steps.begin());
    return steps;
  };
  for (int workers : {0, 2}) {
    CAPTURE(workers);
    std::mutex mutex;
    std::condition_variable built;
    int batches_built = 0;
    data::LoaderOptions options;
    options.imgsz = 96;
    options.seed = 5;
    options.workers = workers;
    options.hyp = flipping_hyp();
    options.match_targets = [&](const data::Batch&) {
      std::lock_guard<std::mutex> lock(mutex);
      ++batches_built;
      built.notify_all();
      return data::MatchedTargets{};
    };
    data::Loader loader(train.dataset, {1, 4, plan}, options);
    int handed_out = 0;
    for (int64_t epoch = 1; epoch < 4; ++epoch) {
      CAPTURE(epoch);
      data::LoaderOptions alone = options;
      alone.match_targets = {};
      data::Loader per_epoch(train.dataset, plan(epoch), epoch, alone);
      while (std::optional<data::Batch> expected = per_epoch.next()) {
        std::optional<data::Batch> batch = loader.next();
        REQUIRE(batch.has_value());
        ++handed_out;
        CHECK(batch->step == expected->step);
        CHECK(batch->targets == expected->targets);
        CHECK(std::memcmp(batch->images.get(), expected->images.get(),
                          size_t(batch->size) * batch->image_bytes()) == 0);
      }
      CHECK_FALSE(loader.next().has_value());  // the epoch's end, once
      if (workers > 0 && epoch < 3) {  // the next epoch's first batch, built before asked for
        std::unique_lock<std::mutex> lock(mutex);
        CHECK(built.wait_for(lock, std::chrono::seconds(20),
                             [&] { return batches_built > handed_out; }));
      }
    }
    CHECK(handed_out == 3 + 4 + 4);          // 7 images in batches of 2; epoch 1 without its first
    CHECK_FALSE(loader.next().has_value());  // after the last epoch: nothing, again
  }
}
