// tests/unit/checkpoint_fixtures.cpp — checkpoints written before the parameter arena (commit
// bdc7485: per-tensor optimizers; tests/fixtures/checkpoints/README.md) still load, resume and
// train on exactly as that version did: SGD's momentum buffers and AdamW's moments are read
// under their old names into the arenas, and two more steps give the weights that version gave.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/shapes.h"
#include "engine/safetensors.h"
#include "engine/shipped_files.h"
#include "models/train/trainer.h"
#include "tests/support/testing.h"

using namespace bareyolo;
namespace fs = std::filesystem;

namespace {

// Resumes `checkpoint` (a fixture) in a run directory of its own to step 5 and compares the
// weights with what the old version saved there.
void resume_like_before(const std::string& optimizer) {
  const fs::path root =
      fs::temp_directory_path() / ("bareyolo-fixture-" + optimizer + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "run" / "weights");
  const std::string data = data::make_shapes_dataset({.out = (root / "shapes").string(),
                                                      .n_train = 16,
                                                      .n_val = 4,
                                                      .imgsz = 64,
                                                      .classes = 2,
                                                      .seed = 0});
  SafetensorsFile checkpoint = SafetensorsFile::load(
      shipped_file("tests/fixtures/checkpoints/" + optimizer + "-step3.safetensors"));
  nlohmann::json config = nlohmann::json::parse(checkpoint.metadata().at("config"));
  config["data"] = data;  // the same images, generated again where this test can see them
  config["cfg"] = shipped_file("models/yolov5-tiny.yaml");
  checkpoint.metadata()["config"] = config.dump();
  const std::string resumed = (root / "run" / "weights" / "last.safetensors").string();
  checkpoint.save(resumed);

  models::TrainOptions options;
  options.resume = resumed;
  options.max_steps = 5;
  options.show_progress = false;
  const models::TrainSummary summary = models::train(options, [](const std::string&) {});
  CHECK(summary.optimizer_steps == 5);

  const SafetensorsFile got = SafetensorsFile::load(resumed);
  const SafetensorsFile want = SafetensorsFile::load(
      shipped_file("tests/fixtures/checkpoints/" + optimizer + "-step5-weights.safetensors"));
  int compared = 0;
  for (const TensorRecord& record : want.records()) {
    INFO(record.name);
    REQUIRE(got.contains(record.name));
    CHECK(got.record(record.name).bytes == record.bytes);  // bit for bit
    ++compared;
  }
  CHECK(compared > 300);  // the EMA's and the raw weights' every tensor
  fs::remove_all(root);
}

}  // namespace

TEST_CASE("an SGD checkpoint written before the parameter arena resumes as it did") {
  resume_like_before("sgd");
}

TEST_CASE("an AdamW checkpoint written before the parameter arena resumes as it did") {
  resume_like_before("adamw");
}
