// tests/dist/step_guard.cpp — a 2-rank data-parallel step with SyncBatchNorm under the step
// guard (kernels/step_guard.h), on each CPU backend: SyncBN's meetings, the loss's global counts
// and the reducer's buckets run inside the step without a host read of a tensor's values and,
// once warm, without an allocation the cache cannot serve. (A planted read that the guard
// refuses: tests/unit/solver.cpp.)
#include "kernels/step_guard.h"
#include "engine/shipped_files.h"
#include "models/train/solver.h"
#include "tests/support/dist_testing.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::dist;
using namespace bareyolo::dist::testing;

namespace {

constexpr int kRankBatch = 2;

// Events the guard has seen inside steps, of every kind.
uint64_t guard_events() {
  return step_guard::count(step_guard::Event::host_read) +
         step_guard::count(step_guard::Event::host_wait) +
         step_guard::count(step_guard::Event::system_allocation);
}

}  // namespace

TEST_CASE("step guard passes a 2-rank DDP step with SyncBN on the CPU") {
  for (const auto& [name, backend] : kCpuBackends) {
    CAPTURE(name);
    check_ranks_ok(run_ranks(
        2,
        [](ProcessGroup& group) {
          if (!step_guard::enforcing()) throw std::runtime_error("the guard is off in the rank");
          DetectionModel model(load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                               {.nc = 2, .seed = 5});
          Solver solver(model,
                        {.epochs = 1,
                         .batches_per_epoch = 8,
                         .batch = 2 * kRankBatch,
                         .nbs = 2 * kRankBatch,
                         .loss = {scale_loss_gains({}, 3, 2, 64), 2},
                         .sync_bn = true},
                        group.comm.get());
          bareyolo::testing::Rng rng(60 + uint64_t(group.rank()));
          const Tensor images = Tensor::from_vector(
              bareyolo::testing::random_vector<float>(rng, kRankBatch * 3 * 64 * 64, 0, 1),
              {kRankBatch, 3, 64, 64});
          const std::vector<LabelRow> labels = {{0, 0, 0.3f, 0.4f, 0.2f, 0.3f},
                                                {1, 1, 0.6f, 0.5f, 0.4f, 0.2f}};
          solver.step(images, labels, 0);  // cold
          const uint64_t before = guard_events();
          for (int64_t iteration = 1; iteration < 4; ++iteration)
            solver.step(images, labels, iteration);
          if (guard_events() != before)
            throw std::runtime_error("the guard saw events in warm steps");
          if (solver.optimizer_steps() != 4)
            throw std::runtime_error("4 steps, " + std::to_string(solver.optimizer_steps()) +
                                     " optimizer steps");
        },
        std::chrono::seconds(120), {.backend = backend}));
  }
}
