// tests/unit/launch_rank_agreement.cpp — ranks agree on their configuration or none starts
// (models/train/rank_agreement.h): equal configurations agree, paths and loader threads may
// differ, and every field in which a rank differs from rank 0 is named, with both values; the
// exchange through the store stops every rank with the same message.
#include <doctest/doctest.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include "data/shapes.h"
#include "engine/distributed/comm/store.h"
#include "engine/shipped_files.h"
#include "models/train/rank_agreement.h"
#include "tests/support/data_fixtures.h"

namespace bareyolo::models {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::TempDir;

// A run of yolov5-tiny on a small shapes dataset, its yaml in `dir`.
TrainOptions tiny_options(const fs::path& dir) {
  TrainOptions options;
  options.data = data::make_shapes_dataset(
      {.out = (dir / "shapes").string(), .n_train = 2, .n_val = 1, .imgsz = 64, .classes = 2});
  options.cfg = shipped_file("models/yolov5-tiny.yaml");
  options.imgsz = 64;
  options.batch = 4;
  return options;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE(
    "launch rank agreement: equal configurations agree, and paths and loader threads may differ") {
  TempDir dir;
  const TrainOptions rank0 = tiny_options(dir.path());
  const RankConfiguration reference = rank_configuration(rank0);
  REQUIRE(reference.size() > 30);  // the saved fields, every hyperparameter, model and data
  REQUIRE(reference[0].name != "error");

  TrainOptions elsewhere = rank0;  // another machine: the same files at other paths
  fs::copy(rank0.data, dir.path() / "data-copy.yaml");
  elsewhere.data = (dir.path() / "data-copy.yaml").string();
  fs::copy(rank0.cfg, dir.path() / "model-copy.yaml");
  elsewhere.cfg = (dir.path() / "model-copy.yaml").string();
  elsewhere.workers = 7;
  elsewhere.run_dir = "runs/train/other";
  elsewhere.sync_bn = true;  // --sync-bn is the default
  CHECK(configuration_differences(
            {reference, rank_configuration(rank0), rank_configuration(elsewhere)}) == "");
}

TEST_CASE("launch rank agreement: every differing field is named, with both ranks' values") {
  // Before: another --imgsz trained at mixed sizes, another model failed with "frame of 469820
  // bytes where rank 1 expected 524288", another --batch was replaced without a word.
  TempDir dir;
  const TrainOptions rank0 = tiny_options(dir.path());
  TrainOptions rank2 = rank0;
  rank2.imgsz = 128;
  rank2.batch = 8;
  rank2.epochs = 5;
  rank2.schedule.lr0 = 0.02;
  rank2.cfg = shipped_file("models/yolov5n.yaml");
  rank2.amp = true;
  rank2.max_pixels = 1000;
  rank2.sync_bn = false;
  rank2.validate = false;
  rank2.seed = 7;  // another sampler order: ranks would train on overlapping shares
  const std::string message = configuration_differences(
      {rank_configuration(rank0), rank_configuration(rank0), rank_configuration(rank2)});
  INFO(message);
  CHECK(message.starts_with("the ranks' configurations differ: "));
  CHECK(contains(message, "rank 2 has --imgsz 128, rank 0 has 64"));
  CHECK(contains(message, "rank 2 has --batch 8, rank 0 has 4"));
  CHECK(contains(message, "rank 2 has --epochs 5, rank 0 has 100"));
  CHECK(contains(message, "rank 2 has --seed 7, rank 0 has 0"));
  CHECK(contains(message, "rank 2 has hyp lr0 0.02, rank 0 has 0.01"));
  CHECK(contains(message, "rank 2 has model yolov5n.yaml ("));
  CHECK(contains(message, "rank 0 has yolov5-tiny.yaml ("));
  CHECK(contains(message, "rank 2 has --amp on, rank 0 has off"));  // resolved on the CPU
  // Each rank's options are resolved for its device: the same request on GPUs with and without
  // bf16 tensor cores differs once the --amp gate is open (gated_defaults.h), in the whole
  // configuration and in the part ranks forked by one launcher compare.
  const models::GatedDefaults opened{.amp_on_bf16_gpus = true};
  const TrainOptions ampere = resolved_for(rank0, {.gpu = true, .bf16_tensor_cores = true}, opened),
                     turing =
                         resolved_for(rank0, {.gpu = true, .bf16_tensor_cores = false}, opened);
  CHECK(
      contains(configuration_differences({rank_configuration(ampere), rank_configuration(turing)}),
               "rank 1 has --amp off, rank 0 has on"));
  const Device cpu = Device::cpu();
  const RankConfiguration forked = device_configuration(ampere, cpu);
  CHECK(forked.size() == numerics_flags(ampere).size());
  CHECK(configuration_differences({forked, device_configuration(turing, cpu)}) ==
        "the ranks' configurations differ: rank 1 has --amp off, rank 0 has on. Start every "
        "rank with the same flags, model and data (nothing was written)");
  CHECK(configuration_differences({forked, device_configuration(ampere, cpu)}).empty());
  CHECK(contains(message, "rank 2 has --max-pixels 1000, rank 0 has 178956970"));
  CHECK(contains(message, "rank 2 has --sync-bn off, rank 0 has on"));
  CHECK(contains(message, "rank 2 has --no-val on, rank 0 has off"));
  CHECK_FALSE(contains(message, "rank 1 "));  // rank 1 agrees with rank 0
  CHECK(contains(message, "Start every rank with the same flags, model and data"));
}

TEST_CASE("launch rank agreement: a field rank 0 lacks is named too") {
  // A rank of another bareyolo version may save a field this one does not know.
  const RankConfiguration rank0 = {{"--imgsz", "64", ""}};
  const RankConfiguration rank1 = {{"--imgsz", "64", ""}, {"--new-flag", "on", ""}};
  CHECK(contains(configuration_differences({rank0, rank1}),
                 "rank 1 has --new-flag on, rank 0 has none"));
}

TEST_CASE("launch rank agreement: a rank that cannot build its configuration is named") {
  TempDir dir;
  const TrainOptions rank0 = tiny_options(dir.path());
  TrainOptions rank1 = rank0;
  rank1.data = (dir.path() / "missing.yaml").string();
  const std::string message =
      configuration_differences({rank_configuration(rank0), rank_configuration(rank1)});
  CHECK(contains(message, "rank 1 could not build its configuration: cannot read the data yaml " +
                              rank1.data));
}

TEST_CASE("launch rank agreement: through the store, every rank stops with the same message") {
  TempDir dir;
  const TrainOptions rank0 = tiny_options(dir.path());
  TrainOptions rank1 = rank0;
  rank1.imgsz = 96;
  dist::StoreServer server("127.0.0.1", 0, "agreement-test");
  std::string errors[2];
  auto as_rank = [&](int rank, const TrainOptions& options) {
    return std::jthread([&, rank] {
      dist::Store store("127.0.0.1", server.port(), "agreement-test", 20s);
      try {
        agree_on_configuration(store, rank, 2, rank_configuration(options));
      } catch (const std::invalid_argument& error) {
        errors[rank] = error.what();
      }
    });
  };
  { std::jthread first = as_rank(0, rank0), second = as_rank(1, rank1); }
  CHECK(contains(errors[0], "rank 1 has --imgsz 96, rank 0 has 64"));
  CHECK(errors[1] == errors[0]);

  dist::StoreServer agreeing("127.0.0.1", 0, "agreement-test");
  std::jthread other([&] {
    dist::Store store("127.0.0.1", agreeing.port(), "agreement-test", 20s);
    try {
      agree_on_configuration(store, 1, 2, rank_configuration(rank0));
    } catch (const std::exception& error) {
      FAIL_CHECK("rank 1 refused an equal configuration: " << error.what());
    }
  });
  dist::Store store("127.0.0.1", agreeing.port(), "agreement-test", 20s);
  CHECK_NOTHROW(agree_on_configuration(store, 0, 2, rank_configuration(rank0)));
}

}  // namespace
}  // namespace bareyolo::models
