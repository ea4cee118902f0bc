// tests/dist/convolution_choices.cpp — every rank of a job runs rank 0's cuDNN algorithms
// (dist::broadcast_convolution_choices): forked CPU ranks over each CPU backend fill their
// tables differently by hand (a GPU's first step fills them by timing, each rank on its own),
// and after the broadcast every rank holds rank 0's choice for each of rank 0's keys and keeps
// its own for the others (a provisional choice stays provisional); rank 0's table is unchanged.
#include <string>

#include "engine/distributed/ddp/data_parallel.h"
#include "kernels/convolution_choices.h"
#include "tests/support/dist_testing.h"

using namespace bareyolo;
using namespace bareyolo::dist;
using namespace bareyolo::dist::testing;
using ops::ConvolutionChoice;
using ops::ConvolutionKey;

namespace {

// A key that differs in its input's channels, and a choice that differs in its algorithm.
ConvolutionKey key(int64_t channels) {
  return {.images = 8,
          .in_channels = channels,
          .height = 40,
          .width = 40,
          .x_batch_stride = 12800,
          .y_batch_stride = 25600,
          .out_channels = 16,
          .kernel_h = 3,
          .kernel_w = 3};
}
ConvolutionChoice choice(int algorithm) {
  return {.algorithm = algorithm,
          .math = 1,
          .workspace = 4096 * algorithm,
          .milliseconds = 0.25 * algorithm};
}
// The same choice, made short of memory (never saved: kernels/convolution_choices.h).
ConvolutionChoice provisional(ConvolutionChoice choice) {
  choice.provisional = true;
  return choice;
}

}  // namespace

TEST_CASE("convolution choices: every rank takes rank 0's, keeping its own for other keys") {
  for (const CpuBackend& cpu : kCpuBackends) {
    CAPTURE(cpu.name);
    check_ranks_ok(run_ranks(
        3,
        [](ProcessGroup& group) {
          const Device device = Device::cpu();
          const int rank = group.rank();
          ops::forget_convolution_choices();
          // Rank 0 chose 1 and 2 (provisionally) for keys 3 and 4; each other rank chose its own
          // for key 3 (timing noise) and met key 5 + rank, which rank 0 did not.
          if (rank == 0)
            ops::adopt_convolution_choices(device,
                                           {{key(3), choice(1)}, {key(4), provisional(choice(2))}});
          else
            ops::adopt_convolution_choices(
                device, {{key(3), choice(5 + rank)}, {key(5 + rank), choice(7)}});
          const size_t adopted = broadcast_convolution_choices(*group.comm, device);
          const ops::ConvolutionChoices table = ops::convolution_choices(device);
          require(adopted == (rank == 0 ? 0u : 2u), "adopted " + std::to_string(adopted));
          require(table.at(key(3)) == choice(1), "key 3 is not rank 0's choice");
          require(table.at(key(4)) == provisional(choice(2)),
                  "key 4 is not rank 0's provisional choice");
          require(table.size() == (rank == 0 ? 2u : 3u),
                  "the table holds " + std::to_string(table.size()) + " choices");
          if (rank != 0) require(table.at(key(5 + rank)) == choice(7), "its own key was lost");
          // An empty table on rank 0 changes nothing on the others.
          if (rank == 0) ops::forget_convolution_choices();
          require(broadcast_convolution_choices(*group.comm, device) == 0, "adopted from none");
          require(ops::convolution_choices(device).size() == (rank == 0 ? 0u : 3u),
                  "an empty broadcast changed a table");
        },
        std::chrono::seconds(60), {.backend = cpu.backend}));
  }
}
