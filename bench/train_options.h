// bench/train_options.h — the command line that bench_train and bench_gpu_train share: the model,
// the size of a step, how many steps and rounds to time, and whether to run the PyTorch peer.
#pragma once

#include <string>

namespace bareyolo::bench {

struct TrainBenchOptions {
  std::string cfg = {};  // found among the shipped yamls
  int imgsz = 0, batch = 0, warmup = 0, steps = 0, rounds = 0;
  bool torch = true;
  bool quick = false;  // the ctest smoke's preset was asked for
};

// Parses --cfg, --imgsz, --batch, --warmup, --steps, --rounds, --no-torch, --quick and --help
// over `defaults`. --quick takes `quick`'s sizes and counts where it stands (a later flag still
// wins); --help prints `usage` and exits. Throws std::invalid_argument, with `usage`, on an
// unknown flag or a missing value, and on what no step can take: an image size that is not a
// positive multiple of 32 (the largest stride), a batch, steps or rounds below 1, warm-up
// below 0.
TrainBenchOptions parse_train_bench_options(int argc, char** argv, TrainBenchOptions defaults,
                                            const TrainBenchOptions& quick, const char* usage);

}  // namespace bareyolo::bench
