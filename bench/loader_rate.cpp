// bench/loader_rate.cpp — see loader_rate.h.
#include "bench/loader_rate.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "data/loader.h"
#include "data/sampler.h"
#include "data/shapes.h"

namespace bareyolo::bench {

namespace fs = std::filesystem;

BenchDataset::BenchDataset(std::string data_yaml, const fs::path& shared_datasets)
    : data_yaml_(std::move(data_yaml)) {
  if (!data_yaml_.empty()) return;
  const fs::path coco = shared_datasets / "coco128" / "data.yaml";
  if (fs::exists(coco)) {
    data_yaml_ = coco.string();
    return;
  }
  scratch_ = fs::temp_directory_path() / ("bareyolo-bench-shapes-" + std::to_string(::getpid()));
  data::ShapesOptions shapes;
  shapes.out = scratch_.string();
  shapes.n_train = 128, shapes.n_val = 8;
  data_yaml_ = data::make_shapes_dataset(shapes);
}

BenchDataset::~BenchDataset() {
  std::error_code ignored;  // a leftover temp folder is not worth failing a benchmark for
  if (!scratch_.empty()) fs::remove_all(scratch_, ignored);
}

double process_cpu_seconds() {
  double seconds = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage usage{};
    ::getrusage(who, &usage);
    for (const timeval& t : {usage.ru_utime, usage.ru_stime})
      seconds += double(t.tv_sec) + double(t.tv_usec) * 1e-6;
  }
  return seconds;
}

namespace {

data::Loader make_loader(const data::Dataset& dataset, const LoaderRateOptions& options,
                         int epoch) {
  data::SamplerOptions sampler;
  sampler.dataset_size = dataset.size();
  sampler.global_batch = options.batch;
  std::vector<data::Step> plan = data::DistributedSampler(sampler).plan_epoch(epoch, options.imgsz);
  if (options.max_batches > 0) plan.resize(std::min(plan.size(), size_t(options.max_batches)));
  data::LoaderOptions loader_options;
  loader_options.imgsz = options.imgsz;
  loader_options.workers = options.workers;
  return data::Loader(dataset, std::move(plan), epoch, loader_options);
}

}  // namespace

double first_batch_seconds(const data::Dataset& dataset, const LoaderRateOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  data::Loader loader = make_loader(dataset, options, 0);
  loader.next();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double loader_images_per_second(const data::Dataset& dataset, const LoaderRateOptions& options) {
  return measure_loader(dataset, options).per_second();
}

LoaderRate measure_loader(const data::Dataset& dataset, const LoaderRateOptions& options) {
  int64_t images = 0;
  data::run_stage_clock(true);
  const double cpu_start = process_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    data::Loader loader = make_loader(dataset, options, epoch);
    while (std::optional<data::Batch> batch = loader.next()) images += batch->size;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu_seconds = process_cpu_seconds() - cpu_start;
  const data::StageSeconds stages = data::stage_seconds();
  data::run_stage_clock(false);
  return {images, seconds, cpu_seconds, stages};
}

}  // namespace bareyolo::bench
