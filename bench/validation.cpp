// bench/validation.cpp — bench_validation: the wall time of YOLOv5's validation of one split
// in a 2-rank CPU job, validated by rank 0 alone (what YOLOv5, and bareyolo before sharded
// validation, do: the other rank waits) against sharded over both ranks (each scores half
// the batches, rank 0 joins the statistics: models/eval/gather_shards.h), measured in the same
// run. Each rank has one thread, as a 2-rank job's ranks get on 2 cores; one process with both
// threads is printed beside them, the most one rank could do alone with the whole machine.
// Every configuration must report the same metrics (checked: the bench fails otherwise).
//
// The model is seeded, not trained (its detections are few, so the time is the forward's
// and the loader's, as in a real validation's early epochs); the data is coco128 when
// ../shared/datasets holds it, else generated shapes.
//
//   bench_validation [--cfg models/yolov5n.yaml] [--imgsz 320] [--batch 4] [--quick]
// Last line: RESULT rank0_alone_s=<a> sharded_2ranks_s=<s> speedup=<a/s> one_process_2threads_s=<t>
#include <sys/mman.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "bench/loader_rate.h"                        // defines: BenchDataset
#include "data/dataset.h"                             // defines: read_dataset_yaml, open_split
#include "engine/distributed/launch/launcher.h"       // defines: launch_workers, LaunchPlan
#include "engine/distributed/launch/process_group.h"  // defines: init_process_group
#include "engine/shipped_files.h"                     // defines: shipped_file
#include "kernels/cpu/thread_pool.h"                  // defines: ThreadPool
#include "models/eval/gather_shards.h"                // defines: gather_shards
#include "models/yolo/model_config.h"                 // defines: load_model_config

using namespace bareyolo;
using namespace bareyolo::models;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string cfg = "models/yolov5n.yaml";
  int imgsz = 320, batch = 4;  // coco128 val's 25 images: 7 batches, shares of 3 and 4
  bool quick = false;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--cfg")
      options.cfg = value();
    else if (arg == "--imgsz")
      options.imgsz = std::stoi(value());
    else if (arg == "--batch")
      options.batch = std::stoi(value());
    else if (arg == "--quick")
      options.quick = true, options.imgsz = 96;
    else
      throw std::invalid_argument("unknown argument " + arg);
  }
  return options;
}

// What a configuration's rank 0 reports through memory shared across the fork.
struct Measured {
  double seconds = std::nan("");
  double map50_95 = std::nan("");
  int64_t images = 0;
};

// Validation of `split` by `ranks` forked ranks of one job (`sharded`: each its share, then
// joined; otherwise rank 0 alone while the others wait at a barrier), `threads` threads each:
// the wall time from a barrier before to the end of rank 0's validation.
Measured validate_in_job(const data::Dataset& split, const Options& options, int ranks, int threads,
                         bool sharded) {
  void* shared =
      ::mmap(nullptr, sizeof(Measured), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) throw std::runtime_error("mmap of the result slot failed");
  Measured* measured = new (shared) Measured;
  dist::LaunchPlan plan;
  plan.nproc = ranks;
  std::fflush(stdout);
  const int status = dist::launch_workers(plan, [&](int local_rank) {
    ThreadPool::global().resize(threads);
    DetectionModel model(load_model_config(shipped_file(options.cfg)), {.nc = 80, .seed = 0});
    dist::ProcessGroup group =
        dist::init_process_group(dist::read_launch_env(dist::process_environment()),
                                 {.backend = std::nullopt, .timeout = std::chrono::minutes(10)});
    ValidationOptions validation{.batch = options.batch, .imgsz = options.imgsz, .workers = 1};
    if (sharded) validation.shard = local_rank, validation.shards = ranks;
    group.comm->barrier()->wait();
    const auto start = Clock::now();
    ValidationResult result;
    if (sharded || local_rank == 0) result = validate(model, split, validation);
    if (sharded) gather_shards(*group.comm, result);
    if (local_rank == 0)
      *measured = {std::chrono::duration<double>(Clock::now() - start).count(),
                   result.metrics.map50_95, result.images};
    group.comm->barrier()->wait();  // the others wait for rank 0, as in training
    return 0;
  });
  const Measured copy = *measured;
  ::munmap(shared, sizeof(Measured));
  if (status != 0)
    throw std::runtime_error("a validation job failed (status " + std::to_string(status) +
                             "); its ranks' messages are above");
  return copy;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse(argc, argv);
    const bench::BenchDataset bench_data("", BAREYOLO_SOURCE_DIR "/../shared/datasets");
    const data::OpenedSplit val =
        data::open_split(data::read_dataset_yaml(bench_data.data_yaml()), "val");
    std::printf("validation of %s (%lld images) at %d, batch %d, %s (seeded)\n",
                bench_data.data_yaml().c_str(), static_cast<long long>(val.dataset.size()),
                options.imgsz, options.batch, options.cfg.c_str());
    const Measured alone = validate_in_job(val.dataset, options, 2, 1, false);
    const Measured sharded = validate_in_job(val.dataset, options, 2, 1, true);
    const Measured whole = validate_in_job(val.dataset, options, 1, 2, false);
    for (const Measured* m : {&sharded, &whole})
      if (m->map50_95 != alone.map50_95 || m->images != alone.images)
        throw std::runtime_error("the configurations disagree: mAP50-95 " +
                                 std::to_string(m->map50_95) + " vs " +
                                 std::to_string(alone.map50_95));
    std::printf("2 ranks x 1 thread, rank 0 validates alone   %8.2f s\n", alone.seconds);
    std::printf("2 ranks x 1 thread, sharded                  %8.2f s  (%.2fx faster)\n",
                sharded.seconds, alone.seconds / sharded.seconds);
    std::printf("1 process x 2 threads                        %8.2f s\n", whole.seconds);
    std::printf("metrics equal in all three (mAP50-95 %.6f over %lld images)\n", alone.map50_95,
                static_cast<long long>(alone.images));
    std::printf(
        "RESULT rank0_alone_s=%.3f sharded_2ranks_s=%.3f speedup=%.2f "
        "one_process_2threads_s=%.3f\n",
        alone.seconds, sharded.seconds, alone.seconds / sharded.seconds, whole.seconds);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_validation: error: %s\n", error.what());
    return 1;
  }
}
