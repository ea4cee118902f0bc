// bench/loader_rate.h — the data loader's throughput, shared by bench_data_loader (its own
// subject) and bench_train (beside the training step's, to show the loader keeps up).
//
// The dataset is ../shared/datasets/coco128 when present (real JPEGs, real decode cost), else
// a small shapes dataset written to a temporary folder that BenchDataset removes on
// destruction. The rate counts augmented training images (mosaics) delivered by
// Loader::next() over whole epochs of the DistributedSampler's plan.
#pragma once

#include <filesystem>
#include <string>

#include "data/dataset.h"
#include "data/stage_clock.h"

namespace bareyolo::bench {

// The data.yaml a loader benchmark reads; owns the scratch folder when it had to write one.
class BenchDataset {
 public:
  // `data_yaml` empty: coco128 under `shared_datasets` if it exists, else generated shapes.
  BenchDataset(std::string data_yaml, const std::filesystem::path& shared_datasets);
  ~BenchDataset();
  BenchDataset(const BenchDataset&) = delete;
  BenchDataset& operator=(const BenchDataset&) = delete;

  const std::string& data_yaml() const { return data_yaml_; }

 private:
  std::string data_yaml_;
  std::filesystem::path scratch_;  // empty unless generated here
};

struct LoaderRateOptions {
  int imgsz = 320, batch = 16, epochs = 1;
  int workers = 2;
  int max_batches = 0;  // > 0: at most this many batches per epoch (quick runs)
};

// What the loader delivered over whole epochs, in wall time and in CPU time (every thread of
// this process and its reaped children: getrusage).
struct LoaderRate {
  int64_t images = 0;
  double wall_seconds = 0, cpu_seconds = 0;
  data::StageSeconds stages;  // CPU seconds per stage of the pipeline, all threads
  double per_second() const { return double(images) / wall_seconds; }
  double per_cpu_second() const { return double(images) / cpu_seconds; }
};
LoaderRate measure_loader(const data::Dataset& dataset, const LoaderRateOptions& options);

// Wall seconds from a loader's construction to its first batch (epoch 0): what a training
// step waits for at each epoch's start.
double first_batch_seconds(const data::Dataset& dataset, const LoaderRateOptions& options);

// Images per second the loader delivers with `options.workers` threads.
double loader_images_per_second(const data::Dataset& dataset, const LoaderRateOptions& options);

// User + system CPU seconds of this process and of its children that were waited for.
double process_cpu_seconds();

}  // namespace bareyolo::bench
