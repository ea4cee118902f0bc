// bench/loader_rate.cpp — see loader_rate.h.
#include "bench/loader_rate.h"

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

double loader_images_per_second(const data::Dataset& dataset, const LoaderRateOptions& options) {
  data::SamplerOptions sampler;
  sampler.dataset_size = dataset.size();
  sampler.global_batch = options.batch;
  data::LoaderOptions loader_options;
  loader_options.imgsz = options.imgsz;
  loader_options.workers = options.workers;
  int64_t images = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    std::vector<data::Step> plan =
        data::DistributedSampler(sampler).plan_epoch(epoch, options.imgsz);
    if (options.max_batches > 0) plan.resize(std::min(plan.size(), size_t(options.max_batches)));
    data::Loader loader(dataset, plan, epoch, loader_options);
    while (std::optional<data::Batch> batch = loader.next()) images += batch->size;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return double(images) / seconds;
}

}  // namespace bareyolo::bench
