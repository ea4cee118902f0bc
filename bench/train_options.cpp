// bench/train_options.cpp — see train_options.h.
#include "bench/train_options.h"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace bareyolo::bench {

TrainBenchOptions parse_train_bench_options(int argc, char** argv, TrainBenchOptions defaults,
                                            const TrainBenchOptions& quick, const char* usage) {
  TrainBenchOptions options = std::move(defaults);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value\n" + usage);
      return std::string(argv[++i]);
    };
    if (arg == "--cfg") {
      options.cfg = value();
    } else if (arg == "--imgsz") {
      options.imgsz = std::stoi(value());
    } else if (arg == "--batch") {
      options.batch = std::stoi(value());
    } else if (arg == "--warmup") {
      options.warmup = std::stoi(value());
    } else if (arg == "--steps") {
      options.steps = std::stoi(value());
    } else if (arg == "--rounds") {
      options.rounds = std::stoi(value());
    } else if (arg == "--no-torch") {
      options.torch = false;
    } else if (arg == "--quick") {
      options.imgsz = quick.imgsz, options.batch = quick.batch, options.warmup = quick.warmup;
      options.steps = quick.steps, options.rounds = quick.rounds, options.quick = true;
    } else if (arg == "--help") {
      std::printf("%s", usage);
      std::exit(0);
    } else {
      throw std::invalid_argument("unknown argument '" + arg + "'\n" + usage);
    }
  }
  if (options.imgsz % 32 != 0 || options.imgsz <= 0)
    throw std::invalid_argument("--imgsz " + std::to_string(options.imgsz) +
                                " must be a positive multiple of 32 (the largest stride)");
  if (options.batch < 1 || options.steps < 1 || options.warmup < 0 || options.rounds < 1)
    throw std::invalid_argument("--batch, --steps and --rounds must be >= 1 and --warmup >= 0");
  return options;
}

}  // namespace bareyolo::bench
