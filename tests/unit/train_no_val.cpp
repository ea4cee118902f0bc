// tests/unit/train_no_val.cpp — a --no-val run (issue 52): epochs that were not validated say so
// in the epoch line, results.csv and results.jsonl instead of showing mAP 0, and --patience
// counts validations (kept in the checkpoint, counted from the history in older ones), so a run
// validated only at its end is never stopped early by them; a tie with the best is a best.
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/shapes.h"
#include "engine/shipped_files.h"
#include "models/train/checkpoint.h"
#include "models/train/trainer.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// yolov5-tiny on 8 + 4 shapes images at 64 px, batch 4, into dir/run.
models::TrainOptions tiny_run(const fs::path& dir, int epochs) {
  data::make_shapes_dataset({.out = (dir / "shapes").string(),
                             .n_train = 8,
                             .n_val = 4,
                             .imgsz = 64,
                             .classes = 2,
                             .seed = 0});
  models::TrainOptions options;
  options.data = (dir / "shapes" / "data.yaml").string();
  options.cfg = shipped_file("models/yolov5-tiny.yaml");
  options.epochs = epochs, options.batch = 4, options.imgsz = 64, options.workers = 1;
  options.show_progress = false;
  options.run_dir = (dir / "run").string();
  return options;
}

}  // namespace

TEST_CASE("--no-val: unvalidated epochs are marked, and patience does not count them") {
  TempDir dir;
  models::TrainOptions options = tiny_run(dir.path(), 3);
  options.validate = false;
  options.patience = 1;
  std::vector<bool> validated;
  models::TrainCallbacks record;
  record.on_fit_epoch_end = [&](const models::EpochMetrics& m) {
    validated.push_back(m.validated);
  };
  options.callbacks = {record};
  std::string log;
  const models::TrainSummary summary =
      models::train(options, [&](const std::string& line) { log += line + "\n"; });

  CHECK(summary.finished);
  CHECK(summary.epochs_run == 3);  // not stopped early by epochs without a validation
  CHECK(validated == std::vector<bool>{false, false, true});
  CHECK(log.find("epoch 1/3  box ") != std::string::npos);
  CHECK(log.find("not validated (--no-val)") != std::string::npos);
  CHECK(log.find("epoch 3/3") != std::string::npos);
  std::ifstream csv(dir.path() / "run" / "results.csv");
  std::stringstream rows;
  rows << csv.rdbuf();
  // Epoch 0's metrics/* and val/* columns (5th to 11th) are empty, epoch 2's are numbers.
  CHECK(rows.str().find(",,,,,,,") != std::string::npos);
  CHECK(rows.str().find("\n2,") != std::string::npos);
  CHECK(fs::exists(dir.path() / "run" / "weights" / "best.safetensors"));  // the validated one
}

TEST_CASE("validated epochs of fitness 0 are each the best so far: best.safetensors each time") {
  // YOLOv5 saves best.pt whenever the fitness equals the best so far: epochs that find nothing
  // (no val labels here) tie, and each writes it.
  TempDir dir;
  models::TrainOptions options = tiny_run(dir.path(), 2);
  for (const fs::directory_entry& label :
       fs::directory_iterator(dir.path() / "shapes" / "labels" / "val"))
    fs::resize_file(label.path(), 0);  // every val image a background
  std::vector<double> fitness;
  int best_saves = 0;
  models::TrainCallbacks record;
  record.on_fit_epoch_end = [&](const models::EpochMetrics& m) {
    if (m.validated) fitness.push_back(m.fitness);
  };
  record.on_model_save = [&](const std::string& path) {
    best_saves += fs::path(path).filename() == "best.safetensors";
  };
  options.callbacks = {record};
  options.patience = 1;  // met by the last epoch's tie: a run that ends there did not stop early
  std::string log;
  models::train(options, [&](const std::string& line) { log += line + "\n"; });
  CHECK(fitness == std::vector<double>{0, 0});
  CHECK(best_saves == 2);
  CHECK(log.find("stopping early") == std::string::npos);
}

TEST_CASE("an epoch that was not validated: empty in results.csv, null in the JSON") {
  models::EpochMetrics unvalidated{.epoch = 3, .train_box = 0.5, .lr0 = 0.01};
  const std::string row = models::results_csv_row(unvalidated);
  CHECK(row.find("3,0.5,0,0,,,,,,,,0.01,") == 0);
  const std::string json = models::epoch_metrics_json(unvalidated);
  CHECK(json.find(R"("metrics/mAP_0.5":null)") != std::string::npos);
  CHECK(json.find(R"("fitness":null)") != std::string::npos);
  CHECK(json.find(R"("val/box_loss":null)") != std::string::npos);
  CHECK(json.find(R"("train/box_loss":0.5)") != std::string::npos);
  const models::EpochMetrics back = models::parse_epoch_metrics_json(json);
  CHECK_FALSE(back.validated);
  CHECK(back.map50 == 0);
  CHECK(back.train_box == 0.5);

  models::EpochMetrics validated = unvalidated;
  validated.validated = true, validated.map50 = 0;  // a measured 0 stays a 0
  CHECK(models::results_csv_row(validated).find("3,0.5,0,0,0,0,0,0,0,0,0,0.01,") == 0);
}

TEST_CASE("a checkpoint without the patience count counts the validations after the best") {
  TempDir dir;
  const std::string path = (dir.path() / "c.safetensors").string();
  models::CheckpointInfo info;
  info.solver.optimizer = "SGD";
  info.nc = 2;
  info.config_json = "{}";
  // Best at epoch 0; epochs 1 and 3 validated since, epoch 2 not.
  info.history = {{.epoch = 0, .validated = true},
                  {.epoch = 1, .validated = true},
                  {.epoch = 2},
                  {.epoch = 3, .validated = true}};
  models::make_checkpoint({}, info).save(path);
  SafetensorsFile file = SafetensorsFile::load(path);
  CHECK(models::read_checkpoint_info(file, path).progress.validations_since_best == 0);  // saved
  nlohmann::json progress = nlohmann::json::parse(file.metadata()["progress"]);
  REQUIRE(progress.erase("validations_since_best") == 1);  // as written before it was saved
  file.metadata()["progress"] = progress.dump();
  CHECK(models::read_checkpoint_info(file, path).progress.validations_since_best == 2);
}
