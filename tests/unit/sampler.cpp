// tests/unit/sampler.cpp — the distributed sampler's invariant (the union of N ranks'
// micro-batches is the single-rank batch at every step, the last one included), its epoch
// shuffle and padding, its error messages, and the validation batches (rect shapes).
#include <algorithm>
#include <set>

#include "data/sampler.h"
#include "data/val_batches.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;

namespace {

data::SamplerOptions options_for(int64_t n, int batch, int world, int rank,
                                 bool drop_last = false) {
  data::SamplerOptions o;
  o.dataset_size = n;
  o.global_batch = batch;
  o.world_size = world;
  o.rank = rank;
  o.seed = 42;
  o.drop_last = drop_last;
  return o;
}

}  // namespace

TEST_CASE("sampler: at every step the union of the ranks' micro-batches is the single-rank batch") {
  for (int64_t n : {103, 64, 5}) {
    for (bool drop_last : {false, true}) {
      if (drop_last && n < 16) continue;
      data::DistributedSampler single(options_for(n, 16, 1, 0, drop_last));
      for (int64_t epoch : {0, 3}) {
        std::vector<data::Step> reference = single.plan_epoch(epoch, 320);
        for (int world : {2, 4, 8, 16}) {
          std::vector<std::vector<data::Step>> ranks;
          for (int r = 0; r < world; ++r)
            ranks.push_back(data::DistributedSampler(options_for(n, 16, world, r, drop_last))
                                .plan_epoch(epoch, 320));
          for (size_t t = 0; t < reference.size(); ++t) {
            std::vector<int64_t> united, positions;
            for (int r = 0; r < world; ++r) {
              REQUIRE(ranks[size_t(r)].size() == reference.size());
              const data::Step& share = ranks[size_t(r)][t];
              CHECK(share.indices.size() == size_t(16 / world));
              united.insert(united.end(), share.indices.begin(), share.indices.end());
              positions.insert(positions.end(), share.positions.begin(), share.positions.end());
            }
            // Same images in the same order, and the same RNG keys (positions).
            CHECK(united == reference[t].indices);
            CHECK(positions == reference[t].positions);
          }
        }
      }
    }
  }
}

TEST_CASE(
    "sampler: one shuffle per epoch padded from its start to a multiple of the global batch") {
  data::DistributedSampler sampler(options_for(103, 16, 1, 0));
  CHECK(sampler.steps_per_epoch() == 7);
  std::vector<int64_t> epoch0 = sampler.epoch_sequence(0), epoch1 = sampler.epoch_sequence(1);
  REQUIRE(epoch0.size() == 112);
  CHECK(std::set<int64_t>(epoch0.begin(), epoch0.begin() + 103).size() == 103);  // a permutation
  CHECK(std::equal(epoch0.begin() + 103, epoch0.end(), epoch0.begin()));         // padding repeats
  CHECK(epoch0 != epoch1);
  CHECK(epoch0 == data::DistributedSampler(options_for(103, 16, 4, 2)).epoch_sequence(0));
  data::SamplerOptions other_seed = options_for(103, 16, 1, 0);
  other_seed.seed = 43;
  CHECK(data::DistributedSampler(other_seed).epoch_sequence(0) != epoch0);
  // drop_last keeps only whole batches; a dataset smaller than the batch wraps around.
  CHECK(data::DistributedSampler(options_for(103, 16, 1, 0, true)).steps_per_epoch() == 6);
  std::vector<int64_t> tiny = data::DistributedSampler(options_for(3, 8, 2, 0)).epoch_sequence(0);
  CHECK(tiny.size() == 8);
  CHECK(std::set<int64_t>(tiny.begin(), tiny.end()).size() == 3);
  data::SamplerOptions ordered = options_for(5, 4, 1, 0);
  ordered.shuffle = false;
  CHECK(data::DistributedSampler(ordered).epoch_sequence(9) ==
        std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1, 2});
}

TEST_CASE("sampler: errors say what is wrong and what to use") {
  CHECK_THROWS_WITH_AS(data::DistributedSampler(options_for(100, 6, 4, 0)),
                       "batch=6 is the global batch and must be divisible by world_size=4 (each "
                       "rank takes batch/world_size images); use batch=4 or batch=8",
                       std::invalid_argument);
  // A batch below the world size: the world size and twice it, never 0.
  CHECK_THROWS_WITH_AS(data::require_divisible_batch(3, 4),
                       doctest::Contains("use batch=4 or batch=8"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(data::require_divisible_batch(0, 2),
                       doctest::Contains("use batch=2 or batch=4"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(data::DistributedSampler(options_for(100, 8, 2, 2)),
                       doctest::Contains("rank=2 is not in [0, world_size=2)"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(data::DistributedSampler(options_for(5, 8, 1, 0, true)),
                       doctest::Contains("leaves no step"), std::invalid_argument);
  CHECK_THROWS_AS(data::DistributedSampler(options_for(0, 8, 1, 0)), std::invalid_argument);
}

TEST_CASE("validation batches: in order with the last one short and rect shapes as in YOLOv5") {
  std::vector<data::ImageRecord> records = {{"a", 640, 480, {}},
                                            {"b", 480, 640, {}},
                                            {"c", 640, 427, {}},
                                            {"d", 500, 500, {}},
                                            {"e", 640, 360, {}}};
  data::Dataset dataset(records, {"x"});
  data::ValBatchOptions square;
  square.batch = 2;
  square.imgsz = 640;
  std::vector<data::Step> plan = data::validation_plan(dataset, square);
  REQUIRE(plan.size() == 3);
  CHECK(plan[2].indices == std::vector<int64_t>{4});
  CHECK(plan[0].width == 640);

  data::ValBatchOptions rect = square;
  rect.rect = true;
  plan = data::validation_plan(dataset, rect);
  REQUIRE(plan.size() == 3);
  // Sorted by h/w: e (0.5625), c (0.667), a (0.75), d (1), b (1.333).
  CHECK(plan[0].indices == std::vector<int64_t>{4, 2});
  CHECK(plan[0].height == 448);  // ceil(0.667 * 20 + 0.5) * 32 = 14 * 32
  CHECK(plan[0].width == 672);   // ceil(20 + 0.5) * 32
  CHECK(plan[1].indices == std::vector<int64_t>{0, 3});
  CHECK(plan[1].height == 672);  // mixed batch: square
  CHECK(plan[2].indices == std::vector<int64_t>{1});
  CHECK(plan[2].height == 672);
  CHECK(plan[2].width == 512);  // ceil(0.75 * 20 + 0.5) * 32 = 16 * 32
}
