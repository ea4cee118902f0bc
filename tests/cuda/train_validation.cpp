// tests/cuda/train_validation.cpp — the trainer's validation (validate_with_loss in
// models/train/trainer.cpp: the EMA's forward, YOLOv5's loss, decode and NMS, all on the model's
// device) on a GPU against the same run on the CPU: one epoch of the tiny model on a small
// shapes dataset, the batches uploaded from pinned memory (Batch::images_tensor).
//
// lr0 = warmup_bias_lr = 0 keeps the weights at their (seeded, equal) start, so the runs
// differ only by float rounding in BatchNorm's running statistics and in the kernels: the
// val losses agree within 1e-4 relative, the mAPs within 1e-3 (a near tie in NMS may flip).
#include <cmath>
#include <filesystem>

#include "data/shapes.h"
#include "engine/shipped_files.h"
#include "models/train/trainer.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;

namespace {

models::EpochMetrics one_epoch(Device device, const std::string& yaml,
                               const std::filesystem::path& run_dir) {
  models::TrainOptions o;
  o.data = yaml;
  o.cfg = shipped_file("models/yolov5-tiny.yaml");
  o.run_dir = run_dir.string();
  o.epochs = 1;
  o.batch = 4;
  o.imgsz = 64;
  o.workers = 1;
  o.show_progress = false;
  o.schedule.lr0 = 0;
  o.schedule.warmup_bias_lr = 0;
  models::EpochMetrics metrics;
  models::TrainCallbacks recorder;
  recorder.on_fit_epoch_end = [&](const models::EpochMetrics& m) { metrics = m; };
  o.callbacks.push_back(recorder);
  models::train(
      o, {.run_dir = o.run_dir, .device = device, .batch = models::plan_batch(o.batch, 1, o.nbs)},
      [](const std::string&) {});
  return metrics;
}

void check_relative(double gpu, double cpu, double rtol, const char* what) {
  CHECK_MESSAGE(std::abs(gpu - cpu) <= rtol * std::abs(cpu),
                what << ": GPU " << gpu << ", CPU " << cpu);
}

}  // namespace

TEST_CASE("cuda trainer validation equals the cpu one (tiny model, one epoch)") {
  testing::TempDir dir;
  const std::string yaml = data::make_shapes_dataset({.out = (dir.path() / "shapes").string(),
                                                      .n_train = 8,
                                                      .n_val = 6,
                                                      .imgsz = 64,
                                                      .classes = 2});
  const models::EpochMetrics cpu = one_epoch(Device::cpu(), yaml, dir.path() / "cpu");
  const models::EpochMetrics gpu = one_epoch(Device::cuda(0), yaml, dir.path() / "gpu");
  REQUIRE(cpu.validated);
  REQUIRE(gpu.validated);
  REQUIRE(cpu.val_obj > 0);  // the val loss was accumulated
  check_relative(gpu.val_box, cpu.val_box, 1e-4, "val box loss");
  check_relative(gpu.val_obj, cpu.val_obj, 1e-4, "val obj loss");
  check_relative(gpu.val_cls, cpu.val_cls, 1e-4, "val cls loss");
  check_relative(gpu.train_obj, cpu.train_obj, 1e-4, "train obj loss");
  CHECK(std::abs(gpu.map50 - cpu.map50) <= 1e-3);
  CHECK(std::abs(gpu.map50_95 - cpu.map50_95) <= 1e-3);
  CHECK(std::abs(gpu.precision - cpu.precision) <= 1e-3);
  CHECK(std::abs(gpu.recall - cpu.recall) <= 1e-3);
}

TEST_CASE("cuda: Adam and AdamW train on the GPU (adam_step's kernel)") {
  testing::TempDir dir;
  const std::string yaml = data::make_shapes_dataset(
      {.out = (dir.path() / "shapes").string(), .n_train = 4, .n_val = 2, .imgsz = 64});
  for (const models::OptimizerKind kind :
       {models::OptimizerKind::adam, models::OptimizerKind::adamw}) {
    CAPTURE(models::optimizer_name(kind));
    models::TrainOptions o;
    o.data = yaml;
    o.cfg = shipped_file("models/yolov5-tiny.yaml");
    o.run_dir = (dir.path() / models::optimizer_name(kind)).string();
    o.epochs = 1;
    o.batch = 2;
    o.nbs = 2;  // a step per batch
    o.imgsz = 64;
    o.show_progress = false;
    o.optimizer = kind;
    models::EpochMetrics metrics;
    models::TrainCallbacks recorder;
    recorder.on_fit_epoch_end = [&](const models::EpochMetrics& m) { metrics = m; };
    o.callbacks.push_back(recorder);
    models::train(o,
                  {.run_dir = o.run_dir,
                   .device = Device::cuda(0),
                   .batch = models::plan_batch(o.batch, 1, o.nbs)},
                  [](const std::string&) {});
    CHECK(std::isfinite(metrics.train_obj));
    CHECK(metrics.train_obj > 0);
  }
}
