// tests/dist/step_guard.cpp — a 2-rank data-parallel step with SyncBatchNorm under the step
// guard (kernels/step_guard.h), on each CPU backend: SyncBN's meetings, the loss's global counts
// and the reducer's buckets run inside the step without a host read of a tensor's values and,
// once warm, without an allocation the cache cannot serve. (A planted read that the guard
// refuses: tests/unit/solver.cpp.)
#include "kernels/step_guard.h"
#include "tests/support/dist_testing.h"
#include "tests/support/tiny_ddp_rank.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::dist;
using namespace bareyolo::dist::testing;

namespace {

// Events the guard has seen inside steps, of every kind.
uint64_t guard_events() {
  return step_guard::count(step_guard::Event::host_read) +
         step_guard::count(step_guard::Event::host_wait) +
         step_guard::count(step_guard::Event::system_allocation);
}

}  // namespace

TEST_CASE("step guard passes a 2-rank DDP step with SyncBN on the CPU") {
  for (const CpuBackend& cpu : kCpuBackends) {
    CAPTURE(cpu.name);
    check_ranks_ok(run_ranks(2,
                             [](ProcessGroup& group) {
                               if (!step_guard::enforcing())
                                 throw std::runtime_error("the guard is off in the rank");
                               bareyolo::testing::TinyDdpRank rank(group, 60);
                               Solver& solver = rank.solver;
                               const Tensor& images = rank.images;
                               const std::vector<LabelRow> labels = {
                                   {0, 0, 0.3f, 0.4f, 0.2f, 0.3f}, {1, 1, 0.6f, 0.5f, 0.4f, 0.2f}};
                               solver.step(images, labels, 0);  // cold
                               const uint64_t before = guard_events();
                               for (int64_t iteration = 1; iteration < 4; ++iteration)
                                 solver.step(images, labels, iteration);
                               if (guard_events() != before)
                                 throw std::runtime_error("the guard saw events in warm steps");
                               if (solver.optimizer_steps() != 4)
                                 throw std::runtime_error("4 steps, " +
                                                          std::to_string(solver.optimizer_steps()) +
                                                          " optimizer steps");
                             },
                             std::chrono::seconds(120), {.backend = cpu.backend}));
  }
}
