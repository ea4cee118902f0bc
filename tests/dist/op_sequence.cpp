// tests/dist/op_sequence.cpp — a 2-rank data-parallel step is as static as one process's
// (tests/unit/op_sequence.cpp): once warm, two consecutive steps of batches with other labels
// (and other labels on each rank) issue the same ops on the same memory on each rank, SyncBN's
// statistics, the global counts and the reducer's buckets included, and allocate nothing. What a
// CUDA graph of a several-rank step needs of the host side; the collectives' own order, operation
// and size the TCP ring's fingerprints check (engine/distributed/comm/collective_fingerprint.h).
#include "kernels/op_sequence.h"

#include <algorithm>
#include <string>
#include <vector>

#include "tests/support/dist_testing.h"
#include "tests/support/tiny_ddp_rank.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::dist;
using namespace bareyolo::dist::testing;

namespace {

// The calls between the Solver's "step begins" and "step ends" marks.
std::vector<op_sequence::Call> step_calls(const std::vector<op_sequence::Call>& calls) {
  auto marked = [&](const char* mark) {
    return std::find_if(calls.begin(), calls.end(),
                        [&](const op_sequence::Call& call) { return call.op == mark; });
  };
  const auto begins = marked("step begins"), ends = marked("step ends");
  if (begins == calls.end() || ends == calls.end() || ends < begins)
    throw std::runtime_error("the step's marks are missing");
  return {begins, ends};
}

}  // namespace

TEST_CASE("op sequence: two warm 2-rank SyncBN steps of other labels issue the same ops") {
  for (const CpuBackend& cpu : kCpuBackends) {
    CAPTURE(cpu.name);
    check_ranks_ok(run_ranks(
        2,
        [](ProcessGroup& group) {
          bareyolo::testing::TinyDdpRank rank(group, 70);
          Solver& solver = rank.solver;
          const Tensor& images = rank.images;
          const float shift = 0.1f * float(group.rank());
          const std::vector<LabelRow> batches[] = {
              {{0, 0, 0.3f + shift, 0.4f, 0.2f, 0.3f}, {1, 1, 0.6f, 0.5f, 0.4f, 0.2f}},
              {{0, 1, 0.7f, 0.2f + shift, 0.3f, 0.3f},
               {1, 0, 0.2f, 0.6f, 0.1f, 0.4f},
               {1, 1, 0.5f, 0.5f, 0.6f, 0.5f}}};
          for (int64_t iteration = 0; iteration < 3; ++iteration)  // warm-up
            solver.step(images, batches[iteration % 2], iteration);
          std::vector<std::vector<op_sequence::Call>> steps;
          for (int64_t iteration = 3; iteration < 5; ++iteration) {
            op_sequence::Recording recording;
            solver.step(images, batches[iteration % 2], iteration);
            steps.push_back(step_calls(recording.take()));
          }
          for (size_t i = 0; i < std::min(steps[0].size(), steps[1].size()); ++i)
            if (!(steps[0][i] == steps[1][i]))
              throw std::runtime_error("call " + std::to_string(i) + " differs:\n  " +
                                       steps[0][i].str() + "\n  " + steps[1][i].str());
          if (steps[0].size() != steps[1].size())
            throw std::runtime_error(std::to_string(steps[0].size()) + " calls against " +
                                     std::to_string(steps[1].size()));
          for (size_t i = 0; i < steps[0].size(); ++i)
            if (steps[0][i].op == "allocate") {
              std::string context;
              for (size_t j = i >= 3 ? i - 3 : 0; j < std::min(steps[0].size(), i + 4); ++j)
                context += "\n  " + steps[0][j].str().substr(0, 200);
              throw std::runtime_error("a warm step allocated:" + context);
            }
          const auto has = [&](const char* op) {
            return std::any_of(steps[0].begin(), steps[0].end(),
                               [&](const op_sequence::Call& call) { return call.op == op; });
          };
          if (!has("yolo_loss") || !has("sgd_step"))
            throw std::runtime_error("the recorded step lacks the loss or the update");
        },
        std::chrono::seconds(120), {.backend = cpu.backend}));
  }
}
