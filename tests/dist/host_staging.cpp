// tests/dist/host_staging.cpp — a communicator that moves only device buffers (as NCCL does)
// trains through with_host_staging (engine/distributed/comm/host_staging.h): over two real
// ranks, the whole trainer (start-up broadcast, SyncBN, gradient buckets, loss counts, loss
// items, validation decisions) hands the inner communicator only device buffers, and ends with
// the same weights as the plain TCP ring.
// (The device-only communicator and its memory: tests/support/device_only_communicator.h.)
#include <filesystem>

#include "data/shapes.h"
#include "engine/distributed/comm/host_staging.h"
#include "engine/safetensors.h"
#include "engine/shipped_files.h"
#include "models/train/trainer.h"
#include "tests/support/device_only_communicator.h"
#include "tests/support/dist_testing.h"
#include "tests/support/kept_checkpoint.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using bareyolo::testing::keep_last_checkpoint;
using namespace bareyolo::dist;
using namespace bareyolo::dist::testing;
namespace fs = std::filesystem;

namespace {

models::TrainOptions tiny_run(const std::string& data, const fs::path& run_dir) {
  models::TrainOptions options;
  options.data = data;
  options.cfg = shipped_file("models/yolov5-tiny.yaml");
  options.epochs = 2;
  options.batch = 4;
  options.imgsz = 64;
  options.workers = 1;
  options.show_progress = false;
  options.run_dir = run_dir.string();
  return options;
}

}  // namespace

TEST_CASE("dist: a device-only communicator trains through host staging like the TCP ring") {
  const fs::path root =
      fs::temp_directory_path() / ("bareyolo-staging-" + std::to_string(::getpid()));
  fs::create_directories(root);
  const std::string data = data::make_shapes_dataset(
      {.out = (root / "shapes").string(), .n_train = 8, .n_val = 4, .imgsz = 64, .classes = 2});
  auto train_two_ranks = [&](const fs::path& run_dir, bool staged) {
    check_ranks_ok(run_ranks(2, [&](ProcessGroup& group) {
      int collectives = 0;
      if (staged)
        group.comm =
            with_host_staging(std::make_unique<DeviceOnly>(std::move(group.comm), &collectives),
                              std::make_unique<HostMemoryAsDevice>());
      models::TrainOptions options = tiny_run(data, run_dir);
      // Rank 0's last checkpoint as written, before the end strips it.
      options.callbacks = {keep_last_checkpoint(run_dir.string() + "-last.safetensors")};
      models::train(options,
                    {.run_dir = run_dir.string(),
                     .rank = group.rank(),
                     .world_size = group.world_size(),
                     .group = &group,
                     .batch = models::plan_batch(options.batch, group.world_size(), options.nbs)},
                    [](const std::string&) {});
      // Broadcasts, buckets, SyncBN, counts, items and decisions: hundreds in two epochs.
      if (staged && collectives < 100)
        throw std::runtime_error("only " + std::to_string(collectives) +
                                 " collectives reached the device-only communicator");
    }));
  };
  train_two_ranks(root / "plain", false);
  train_two_ranks(root / "staged", true);

  const SafetensorsFile plain = SafetensorsFile::load((root / "plain-last.safetensors").string());
  const SafetensorsFile staged = SafetensorsFile::load((root / "staged-last.safetensors").string());
  int compared = 0;
  for (const TensorRecord& record : plain.records()) {
    if (record.dtype != "F32") continue;
    CHECK_MESSAGE(plain.values<float>(record.name) == staged.values<float>(record.name),
                  record.name);
    ++compared;
  }
  CHECK(compared > 100);
  fs::remove_all(root);
}
