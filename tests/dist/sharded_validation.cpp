// tests/dist/sharded_validation.cpp — sharded validation (models/eval/gather_shards.h): 1, 2
// and 3 forked ranks, each scoring its share of the batches, give rank 0 the metrics of one
// process scoring them all, exactly; and broadcast_buffers, what makes the shares score with
// one model when BatchNorm ran unsynchronised.
#include <cstdint>
#include <filesystem>
#include <string>

#include "data/shapes.h"
#include "engine/distributed/ddp/data_parallel.h"
#include "models/eval/gather_shards.h"
#include "tests/support/dist_testing.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;
using bareyolo::dist::testing::check_ranks_ok;
using bareyolo::dist::testing::require;
using bareyolo::dist::testing::run_ranks;

namespace {

// A deterministic imperfect predictor: each label comes back with a shifted box, a confidence
// from four levels (so that many tie, and the order of tied entries matters), every fifth
// with the wrong class, plus one background detection per image.
BatchPredictor noisy_oracle(int classes) {
  return [=](const data::Batch& batch) {
    std::vector<std::vector<Detection>> detections(size_t(batch.size));
    for (int64_t r = 0; r < batch.num_targets(); ++r) {
      const data::LabelRow label = batch.label(r);
      const float w = label.w * float(batch.width), h = label.h * float(batch.height);
      const float shift = 0.08f * float(r % 3) * w;
      const BoxXYXY box = xywh_to_xyxy(
          {label.cx * float(batch.width) + shift, label.cy * float(batch.height), w, h});
      const int cls = r % 5 == 4 ? (label.class_id + 1) % classes : label.class_id;
      detections[size_t(label.image)].push_back({box, 0.3f + 0.2f * float(r % 4), cls});
    }
    for (int i = 0; i < batch.size; ++i)
      detections[size_t(i)].push_back({{1, 1, 9, 9}, 0.5f, i % classes});
    return detections;
  };
}

}  // namespace

TEST_CASE("sharded validation: 1, 2 and 3 ranks give one process's metrics exactly") {
  const std::string root = (std::filesystem::temp_directory_path() /
                            ("bareyolo_sharded_val_" + std::to_string(::getpid())))
                               .string();
  std::filesystem::remove_all(root);
  const std::string yaml = data::make_shapes_dataset(
      {.out = root, .n_train = 2, .n_val = 9, .imgsz = 64, .classes = 3, .seed = 11});
  const data::OpenedSplit split = data::open_split(data::read_dataset_yaml(yaml), "val");
  ValidationOptions options;
  options.batch = 2;  // 5 batches: shares of 2+3 batches on 2 ranks, 1+2+2 on 3
  options.imgsz = 64;
  const ValidationResult whole = validate(split.dataset, options, noisy_oracle(3), 32);
  REQUIRE(whole.images == 9);
  // Far from perfect and from zero, so that a lost, doubled or reordered entry shows.
  CHECK(whole.metrics.map50 > 0.2);
  CHECK(whole.metrics.map50_95 < 0.9);
  int64_t confused = 0;  // the matrix counts something, so the shards' join is a real check
  for (int64_t n : whole.confusion.counts()) confused += n;
  CHECK(confused > 0);

  for (int world : {1, 2, 3}) {
    CAPTURE(world);
    const auto results = run_ranks(world, [&](dist::ProcessGroup& group) {
      ValidationOptions share = options;
      share.shard = group.rank();
      share.shards = world;
      ValidationResult result = validate(split.dataset, share, noisy_oracle(3), 32);
      const ShardRange range = shard_range(5, group.rank(), world);
      require(result.images == std::min<int64_t>(2 * range.end, 9) - 2 * range.begin,
              "this rank scored " + std::to_string(result.images) + " images, not its share");
      gather_shards(*group.comm, result);
      if (group.rank() != 0) return;
      require(result.images == whole.images && result.labels == whole.labels, "image counts");
      require(result.stats.conf == whole.stats.conf &&
                  result.stats.correct == whole.stats.correct &&
                  result.stats.pred_class == whole.stats.pred_class &&
                  result.stats.target_class == whole.stats.target_class,
              "the joined statistics are not one process's");
      require(result.confusion.counts() == whole.confusion.counts(),
              "the joined confusion matrix is not one process's");
      const DetectionMetrics& a = result.metrics;
      const DetectionMetrics& b = whole.metrics;
      require(
          a.map50 == b.map50 && a.map50_95 == b.map50_95 && a.mean_precision == b.mean_precision &&
              a.mean_recall == b.mean_recall,
          "metrics differ: mAP50 " + std::to_string(a.map50) + " vs " + std::to_string(b.map50));
    });
    check_ranks_ok(results);
  }
  std::filesystem::remove_all(root);
}

TEST_CASE("shard_range: contiguous shares of every batch, sizes within one") {
  for (int64_t steps : {0, 1, 5, 7}) {
    for (int shards : {1, 2, 3, 8}) {
      int64_t next = 0;
      for (int shard = 0; shard < shards; ++shard) {
        const ShardRange range = shard_range(steps, shard, shards);
        CHECK(range.begin == next);
        CHECK(range.end - range.begin >= steps / shards);
        CHECK(range.end - range.begin <= steps / shards + 1);
        next = range.end;
      }
      CHECK(next == steps);
    }
  }
  CHECK_THROWS_WITH_AS(shard_range(5, 2, 2), doctest::Contains("shard 2 of 2"),
                       std::invalid_argument);
}

TEST_CASE("broadcast_buffers: rank 0's buffers everywhere, each rank's parameters untouched") {
  const auto results = run_ranks(3, [](dist::ProcessGroup& group) {
    const float mine = float(group.rank() + 1);
    Tensor weight = Tensor::from_vector(std::vector<float>(4, mine), {1, 1, 1, 4});
    Tensor grad = Tensor::zeros({1, 1, 1, 4});
    Tensor running_mean = Tensor::from_vector(std::vector<float>(3, mine), {1, 1, 1, 3});
    Tensor counter =
        Tensor::from_vector(std::vector<int64_t>{int64_t(group.rank()) + 7}, {1, 1, 1, 1});
    const std::vector<StateEntry> state = {
        {.name = "bn.weight", .value = &weight, .grad = &grad, .dims = {4}},
        {.name = "bn.running_mean", .value = &running_mean, .grad = nullptr, .dims = {3}},
        {.name = "bn.num_batches_tracked", .value = &counter, .grad = nullptr, .dims = {}}};
    dist::broadcast_buffers(*group.comm, state);
    require(weight.view<float>().data[0] == mine, "a parameter was overwritten");
    require(running_mean.view<float>().data[2] == 1.0f, "running_mean is not rank 0's");
    require(counter.view<int64_t>().data[0] == 7, "num_batches_tracked is not rank 0's");
  });
  check_ranks_ok(results);
}
