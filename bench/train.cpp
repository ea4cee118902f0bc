// bench/train.cpp — bench_train: training images per second of a YOLOv5 model on the CPU, one
// process and data-parallel, beside the data loader's rate and PyTorch's on the same network.
//
//   bench_train [--cfg models/yolov5n.yaml] [--imgsz 320] [--batch 16] [--warmup 2]
//               [--steps 6] [--rounds 3] [--no-torch] [--quick]
//   --quick: 128 px, batch 4, 1 warm-up and 2 timed steps, 1 round, 2 loader batches (the
//   ctest smoke)
//
// A step is the trainer's: the Solver's (models/train/solver.h: forward, YOLOv5's loss,
// backward with the reducer's hook, then the update: reducer finish, gradient clipping at norm
// 10, SGD with Nesterov momentum, zero_grad and the EMA update), with nbs = the batch, so that
// every batch ends with an optimizer step. Batches are synthetic and made once, in memory (random
// pixels, three random boxes per image), so no loader competes for the cores. Each figure is the
// batch over the median time of `steps` steps after `warmup` steps. Configurations:
//   1 rank  x 2 threads, batch B           the headline, in turns with the same step at 1
//                                          thread (threads2_scaling = rate(2) / rate(1)) and
//                                          with PyTorch YOLOv5's own Model and ComputeLoss at
//                                          2 threads (bench/yolov5_train.py, when $YOLOV5_DIR
//                                          names a YOLOv5 checkout or the pip package's
//                                          folder), for `rounds` rounds
//   1 rank  x 1 thread,  batch B/2         the baseline of the scaling
//   2 ranks x 1 thread,  batch B/2 each    SyncBN on, gradients through the TCP ring in
//                                          buckets sized from the model (the trainer's), and
//                                          again in PyTorch's 25 MB ones, and with BatchNorm
//                                          unsynced (what SyncBN's collectives cost)
//   scaling = rate(2 ranks) / rate(1 rank x 1 thread), the median over `rounds` rounds in
//   which the 1-thread baseline and the multi-rank configurations take turns
//   2 independent processes x 1 thread, batch B/2 each, no communication: the most 2 processes
//                                          reach here (shared caches, memory bandwidth, clocks)
// Then the loader's rate on real images (coco128 when present; 2 workers, mosaics at the same
// size and batch) against the headline rate, and bench/torch_train.py (the same layers in
// plain torch, random data, same batch, 2 threads, a simple loss) when a Python with torch
// exists — run last, so that nothing competes with it or with ours.
// Last line: RESULT ours_img_s=<x> torch_img_s=<plain torch> ratio_vs_torch=<x/t>
//   yolov5_img_s=<y> ratio_vs_yolov5=<x/y, the median of the rounds' ratios> ddp2_scaling=<s>
//   threads2_scaling=<s2> memory2_scaling=<m> compute2_scaling=<c> (a peer's figures are nan
//   without it; m: the host's memory bandwidth at 2 threads over 1, bench/memory_bandwidth.h,
//   the ceiling of the step's memory-bound passes; c: the host's FMA throughput at 2 threads
//   over 1, bench/compute_throughput.h, measured after every round of the headline and of the
//   scaling table, the median: the ceiling of both scalings).
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/compute_throughput.h"  // defines: measure_compute_scaling
#include "bench/loader_rate.h"         // defines: BenchDataset, loader_images_per_second
#include "bench/memory_bandwidth.h"    // defines: measure_memory_scaling
#include "bench/python_peer.h"         // defines: find_python_running, find_yolov5
#include "bench/synthetic_batch.h"     // defines: synthetic_batch
#include "bench/train_options.h"       // defines: TrainBenchOptions, parse_train_bench_options
#include "data/dataset.h"              // defines: read_dataset_yaml, open_split
#include "engine/distributed/launch/launcher.h"       // defines: launch_workers, LaunchPlan
#include "engine/distributed/launch/process_group.h"  // defines: init_process_group
#include "engine/shipped_files.h"                     // defines: shipped_file
#include "kernels/cpu/thread_pool.h"                  // defines: ThreadPool
#include "models/train/solver.h"                      // defines: Solver (the trainer's step)

using namespace bareyolo;
using namespace bareyolo::models;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kHeadlineThreads = 2;  // the machine's cores; PyTorch gets the same
constexpr int kRanks = 2;
constexpr std::chrono::minutes kCollectiveTimeout{5};
constexpr double kBusyLoad = 1.0;  // 1-minute load average above which the figures are suspect

using Options = bench::TrainBenchOptions;
const Options kDefaults{
    .cfg = "models/yolov5n.yaml", .imgsz = 320, .batch = 16, .warmup = 2, .steps = 6, .rounds = 3};
const Options kQuick{.imgsz = 128, .batch = 4, .warmup = 1, .steps = 2, .rounds = 1};
const char kUsage[] =
    "bench_train [--cfg models/yolov5n.yaml] [--imgsz 320] [--batch 16] [--warmup 2]\n"
    "            [--steps 6] [--rounds 3] [--no-torch] [--quick]\n"
    "  --quick: 128 px, batch 4, 1 warm-up and 2 timed steps, 1 round, 2 loader batches\n";

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

using bench::SyntheticBatch;

// What every configuration shares: the model's config and loss settings, the step counts.
struct Setup {
  ModelConfig config;
  LossOptions loss;
  Options options;

  explicit Setup(const Options& o) : config(load_model_config(o.cfg)), options(o) {
    DetectionModel probe(config);
    loss = {scale_loss_gains({}, probe.num_levels(), probe.num_classes(), o.imgsz),
            probe.num_classes()};
  }
  SyntheticBatch batch(int images, uint32_t seed) const {
    return bench::synthetic_batch(images, options.imgsz, loss.classes, seed);
  }
  // The trainer's recipe for a global batch of `batch`, one optimizer step per batch (nbs =
  // batch); `sync_bn` and `bucket_mb` matter with several ranks.
  SolverOptions solver(int batch, bool sync_bn = true, double bucket_mb = 0) const {
    return {.batch = batch, .nbs = batch, .loss = loss, .sync_bn = sync_bn, .bucket_mb = bucket_mb};
  }
};

// Median seconds of a full training step on `batch`, over the timed steps.
double median_step_seconds(Solver& solver, const SyntheticBatch& batch, const Setup& setup) {
  std::vector<double> seconds;
  for (int step = 0; step < setup.options.warmup + setup.options.steps; ++step) {
    const auto start = Clock::now();
    solver.step(batch.images, batch.labels, step);
    if (step >= setup.options.warmup) seconds.push_back(seconds_since(start));
  }
  return median(seconds);
}

// One process with `threads` threads training on batches of `batch`: images per second.
// `loss_fraction`, when given, receives the share of the step YOLOv5's loss (target matching,
// loss and its gradient) takes, measured on the same model and batch.
double single_rank_images_per_second(const Setup& setup, int batch, int threads,
                                     double* loss_fraction = nullptr) {
  ThreadPool::global().resize(threads);
  DetectionModel model(setup.config);
  Solver solver(model, setup.solver(batch));
  const SyntheticBatch data = setup.batch(batch, 1);
  const double step_s = median_step_seconds(solver, data, setup);
  if (loss_fraction) {
    const std::vector<Tensor>& head = model.forward(data.images, Mode::train);
    std::vector<double> seconds;
    for (int rep = 0; rep < 3; ++rep) {
      const auto start = Clock::now();
      head_loss(model, head, data.labels, setup.loss, batch);
      seconds.push_back(seconds_since(start));
    }
    *loss_fraction = median(seconds) / step_s;
  }
  return batch / step_s;
}

// kRanks forked ranks (bareyolo's launcher), 1 thread each, `per_rank_batch` images each:
// the images per second of all ranks together. `data_parallel`: one job — SyncBN on unless
// `sync_bn` is false, gradients averaged through the TCP ring in buckets of `bucket_mb` (0:
// sized from the model, the trainer's default); otherwise the ranks train independent models
// without communicating, which is the most kRanks processes can reach on this machine.
struct MultiRank {
  bool data_parallel = true;  // false: independent processes
  bool sync_bn = true;
  double bucket_mb = 0;
};
double multi_rank_images_per_second(const Setup& setup, int per_rank_batch, MultiRank how) {
  // Each rank reports its median step time through memory shared across the fork.
  void* shared = ::mmap(nullptr, kRanks * sizeof(double), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) throw std::runtime_error("mmap of the result slots failed");
  double* step_s = static_cast<double*>(shared);
  std::fill(step_s, step_s + kRanks, std::nan(""));
  dist::LaunchPlan plan;
  plan.nproc = kRanks;
  std::fflush(stdout);
  const int status = dist::launch_workers(plan, [&](int local_rank) {
    ThreadPool::global().resize(1);
    DetectionModel model(setup.config);
    const SyntheticBatch data = setup.batch(per_rank_batch, 100 + uint32_t(local_rank));
    if (!how.data_parallel) {
      Solver solver(model, setup.solver(per_rank_batch));
      step_s[local_rank] = median_step_seconds(solver, data, setup);
      return 0;
    }
    // A bench that hangs on a dead rank helps nobody: every collective gives up after this.
    dist::ProcessGroup group =
        dist::init_process_group(dist::read_launch_env(dist::process_environment()),
                                 {.backend = std::nullopt, .timeout = kCollectiveTimeout});
    Solver solver(model, setup.solver(kRanks * per_rank_batch, how.sync_bn, how.bucket_mb),
                  group.comm.get());
    step_s[local_rank] = median_step_seconds(solver, data, setup);
    return 0;
  });
  double images_per_second = 0;
  for (int rank = 0; rank < kRanks; ++rank) images_per_second += per_rank_batch / step_s[rank];
  ::munmap(shared, kRanks * sizeof(double));
  if (status != 0)
    throw std::runtime_error("the " + std::to_string(kRanks) + "-rank run failed (status " +
                             std::to_string(status) + "); its ranks' messages are above");
  return images_per_second;
}

// The loader's rate (2 workers, mosaics at the bench's size and batch) on the bench dataset.
double loader_images_per_second(const Options& options, std::string* described) {
  const bench::BenchDataset bench_data("", BAREYOLO_SOURCE_DIR "/../shared/datasets");
  const data::OpenedSplit train =
      data::open_split(data::read_dataset_yaml(bench_data.data_yaml()), "train");
  *described = bench_data.data_yaml() + ", " + std::to_string(train.dataset.size()) + " images";
  return bench::loader_images_per_second(train.dataset, {.imgsz = options.imgsz,
                                                         .batch = options.batch,
                                                         .epochs = 1,
                                                         .workers = kHeadlineThreads,
                                                         .max_batches = options.quick ? 2 : 0});
}

// A PyTorch peer script's images per second: runs `python -I bench/<script> <arguments>`
// with the bench's size, batch, threads and steps, shows its lines prefixed "<name>: " and
// reads "<key>=<rate>" from them; nan when the script fails.
double peer_images_per_second(const Options& options, const std::string& python, const char* script,
                              const std::string& arguments, const char* name,
                              const std::string& key) {
  const std::string command =
      python + " -I " + shipped_file(std::string("bench/") + script) + " --imgsz " +
      std::to_string(options.imgsz) + " --batch " + std::to_string(options.batch) + " --threads " +
      std::to_string(kHeadlineThreads) + " --warmup " + std::to_string(options.warmup) +
      " --steps " + std::to_string(options.steps) + arguments + " 2>&1";
  std::fflush(stdout);
  FILE* output = ::popen(command.c_str(), "r");
  if (!output) return std::nan("");
  double rate = std::nan("");
  char line[1024];
  while (std::fgets(line, sizeof line, output)) {
    std::printf("%s: %s", name, line);
    if (const char* found = std::strstr(line, (key + "=").c_str()))
      rate = std::atof(found + key.size() + 1);
  }
  if (::pclose(output) != 0) {
    std::printf("%s: %s failed; %s is nan\n", name, command.c_str(), key.c_str());
    return std::nan("");
  }
  return rate;
}

// bench/torch_train.py's images per second (plain torch, the same layers); nan when no Python
// imports torch or the script fails.
double torch_images_per_second(const Options& options) {
  const std::string python = bench::find_python_running("import torch");
  if (python.empty()) {
    std::printf(
        "torch: no Python that imports torch (Debian: apt-get install python3-torch); "
        "torch_img_s is nan\n");
    return std::nan("");
  }
  return peer_images_per_second(options, python, "torch_train.py", "", "torch", "torch_img_s");
}

// PyTorch YOLOv5's own Model and ComputeLoss (bench/yolov5_train.py) from `yolov5`.
double yolov5_images_per_second(const Options& options, const bench::Yolov5Install& yolov5) {
  return peer_images_per_second(options, yolov5.python, "yolov5_train.py",
                                " --yolov5-dir '" + yolov5.folder + "'", "yolov5", "yolov5_img_s");
}

std::string fixed(double value, int decimals = 2) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}
std::string percent(double fraction) { return fixed(100 * fraction, 1) + "%"; }
std::string joined(const std::vector<double>& values) {
  std::string text;
  for (double value : values) text += (text.empty() ? "" : " ") + fixed(value);
  return text;
}

// One multi-rank configuration of the scaling table.
struct ScalingRow {
  std::string configuration;
  MultiRank how;
  std::string note;  // after "scaling <s>x"
};

void print_rate(const std::string& configuration, double images_per_second,
                const std::string& note) {
  std::printf("%-50s %7.1f img/s%s%s\n", configuration.c_str(), images_per_second,
              note.empty() ? "" : "  ", note.c_str());
}

// The 1-minute load average: on a shared machine, other work slows every figure here, and
// PyTorch's most (its OpenMP threads spin while waiting for a descheduled peer).
double load_average() {
  double load = std::nan("");
  if (FILE* file = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(file, "%lf", &load) != 1) load = std::nan("");
    std::fclose(file);
  }
  return load;
}

std::string describe_load(double load) {
  return "load average " + fixed(load, 1) + " on " +
         std::to_string(std::thread::hardware_concurrency()) + " cores";
}

Options parse(int argc, char** argv) {
  const Options options = bench::parse_train_bench_options(argc, argv, kDefaults, kQuick, kUsage);
  if (options.batch % kRanks != 0)
    throw std::invalid_argument("--batch " + std::to_string(options.batch) +
                                " must be a multiple of " + std::to_string(kRanks) +
                                " (it is split over " + std::to_string(kRanks) + " ranks)");
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse(argc, argv);
    const Setup setup(options);
    const double load_before = load_average();
    const int half = options.batch / kRanks;
    std::printf(
        "%s (%lld parameters, %d classes) at %dx%d; synthetic in-memory batches, %d "
        "boxes per image; step = forward + YOLOv5 loss + backward + clip + SGD "
        "(Nesterov) + EMA; median of %d steps after %d warm-up; %s\n",
        options.cfg.c_str(), (long long)DetectionModel(setup.config).parameter_count(),
        setup.loss.classes, options.imgsz, options.imgsz, bench::kBoxesPerImage, options.steps,
        options.warmup, describe_load(load_before).c_str());

    // The headline takes turns with the same step at 1 thread (threads2_scaling) and with
    // PyTorch YOLOv5's own step when $YOLOV5_DIR names YOLOv5 (ratio_vs_yolov5), round after
    // round; the figures are medians over the rounds (of each round's ratios for the ratios).
    const bench::Yolov5Install yolov5 = bench::find_yolov5("torch, yaml", "utils.loss");
    if (!yolov5.present())
      std::printf("yolov5: %s; yolov5_img_s is nan\n", yolov5.why_absent.c_str());
    double loss_fraction = 0;
    std::vector<double> headline_rates, one_thread_full_rates, threads2_scalings, yolov5_rates,
        yolov5_ratios;
    // The host's FMA throughput at 2 threads over 1 after each round, here and in the scaling
    // table's rounds: what a second core gave at the time.
    std::vector<double> compute_scalings;
    for (int round = 0; round < options.rounds; ++round) {
      headline_rates.push_back(single_rank_images_per_second(
          setup, options.batch, kHeadlineThreads, round == 0 ? &loss_fraction : nullptr));
      one_thread_full_rates.push_back(single_rank_images_per_second(setup, options.batch, 1));
      threads2_scalings.push_back(headline_rates.back() / one_thread_full_rates.back());
      compute_scalings.push_back(bench::measure_compute_scaling().ratio);
      if (!yolov5.present()) continue;
      yolov5_rates.push_back(yolov5_images_per_second(options, yolov5));
      yolov5_ratios.push_back(headline_rates.back() / yolov5_rates.back());
    }
    const double ours = median(headline_rates), threads2_scaling = median(threads2_scalings);
    const double yolov5_rate = yolov5.present() ? median(yolov5_rates) : std::nan("");
    const double ratio_vs_yolov5 = yolov5.present() ? median(yolov5_ratios) : std::nan("");
    const std::string batch_text = "batch " + std::to_string(options.batch);
    print_rate(std::to_string(kHeadlineThreads) + " threads, 1 rank, " + batch_text, ours,
               "YOLOv5's loss takes " + percent(loss_fraction) + " of the step");
    print_rate("1 thread, 1 rank, " + batch_text, median(one_thread_full_rates),
               std::to_string(kHeadlineThreads) + " threads: " + fixed(threads2_scaling) +
                   "x (target >= 1.85; rounds: " + joined(threads2_scalings) + ")");
    const bench::MemoryScaling memory = bench::measure_memory_scaling();
    std::printf(
        "memory bandwidth: %.1f GB/s at 1 thread, %.1f at 2 (%.2fx): the most a "
        "memory-bound pass can gain from the second thread\n",
        memory.one_thread, memory.two_threads, memory.ratio());
    std::printf(
        "FMA throughput at 2 threads over 1 after each round: %s: the most any pass can gain "
        "from the second thread\n",
        joined(compute_scalings).c_str());
    print_rate("PyTorch YOLOv5 Model + ComputeLoss, " + std::to_string(kHeadlineThreads) +
                   " threads, " + batch_text,
               yolov5_rate,
               "ours / it: " + fixed(ratio_vs_yolov5) +
                   " (target >= 1.3; rounds: " + joined(yolov5_ratios) + ")");
    // The scaling's configurations take turns, round after round, and each figure is the
    // median over the rounds (a scaling: of each round's ratio to that round's baseline): on
    // a shared 2-core VM one run of one configuration swings by 10%, and the turns spread
    // the machine's slow moments over all of them. Inside a round the rows' order rotates:
    // in a fixed order the first row, always run right after the 1-rank baseline, read
    // 0.03-0.05 below the 25 MB row in four runs of four, where a harness rotating the two
    // found them equal (median ratio 0.997 over 12 rounds).
    const std::vector<ScalingRow> rows = {
        {"1 thread x " + std::to_string(kRanks) + " ranks, batch " + std::to_string(half) +
             " each, SyncBN",
         {},
         " (target >= 1.85), buckets sized from the model"},
        {"1 thread x " + std::to_string(kRanks) + " ranks, 25 MB buckets (PyTorch's)",
         {.bucket_mb = 25},
         ""},
        {"1 thread x " + std::to_string(kRanks) + " ranks, BatchNorm unsynced",
         {.sync_bn = false},
         ": what SyncBN's collectives cost"},
        {"1 thread x " + std::to_string(kRanks) + " independent processes, batch " +
             std::to_string(half) + " each",
         {.data_parallel = false},
         ": the machine's ceiling for the scaling (no communication)"},
    };
    std::vector<double> one_thread_rates;
    std::vector<std::vector<double>> rates(rows.size()), scalings(rows.size());
    for (int round = 0; round < options.rounds; ++round) {
      one_thread_rates.push_back(single_rank_images_per_second(setup, half, 1));
      for (size_t turn = 0; turn < rows.size(); ++turn) {
        const size_t row = (size_t(round) + turn) % rows.size();
        rates[row].push_back(multi_rank_images_per_second(setup, half, rows[row].how));
        scalings[row].push_back(rates[row].back() / one_thread_rates.back());
      }
      compute_scalings.push_back(bench::measure_compute_scaling().ratio);
    }
    print_rate("1 thread, 1 rank, batch " + std::to_string(half), median(one_thread_rates),
               "median of " + std::to_string(options.rounds) + " rounds");
    for (size_t row = 0; row < rows.size(); ++row)
      print_rate(rows[row].configuration, median(rates[row]),
                 "scaling " + fixed(median(scalings[row])) + "x" + rows[row].note +
                     " (rounds: " + joined(scalings[row]) + ")");
    const double scaling = median(scalings[0]);
    const double compute2_scaling = median(compute_scalings);
    std::printf(
        "FMA throughput at 2 threads over 1, after each round of the table: %s; over the whole "
        "run: %.2fx (median)\n",
        joined(std::vector<double>(compute_scalings.end() - options.rounds, compute_scalings.end()))
            .c_str(),
        compute2_scaling);

    std::string dataset;
    const double loader = loader_images_per_second(options, &dataset);
    print_rate("loader, " + std::to_string(kHeadlineThreads) + " workers, mosaics", loader,
               fixed(loader / ours, 1) + "x the " + std::to_string(kHeadlineThreads) +
                   "-thread training rate: feeding it takes ~" + percent(ours / loader) +
                   " of the cores (" + dataset + ")");

    if (!options.torch) std::printf("torch: skipped (--no-torch)\n");
    const double torch = options.torch ? torch_images_per_second(options) : std::nan("");
    std::printf("ours / plain torch: %.2f; ours / PyTorch YOLOv5: %.2f\n", ours / torch,
                ratio_vs_yolov5);
    // Only the load before the run tells of other work: by the end it counts this bench too.
    if (load_before > kBusyLoad)
      std::printf(
          "warning: the machine was busy (%s at the start): other work shared the "
          "cores, so these figures understate both sides, PyTorch's most; rerun when "
          "idle\n",
          describe_load(load_before).c_str());
    std::printf(
        "RESULT ours_img_s=%.2f torch_img_s=%.2f ratio_vs_torch=%.2f yolov5_img_s=%.2f "
        "ratio_vs_yolov5=%.2f ddp2_scaling=%.2f threads2_scaling=%.2f memory2_scaling=%.2f "
        "compute2_scaling=%.2f\n",
        ours, torch, ours / torch, yolov5_rate, ratio_vs_yolov5, scaling, threads2_scaling,
        memory.ratio(), compute2_scaling);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_train: error: %s\n", error.what());
    return 1;
  }
}
