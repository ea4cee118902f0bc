// tests/unit/train_checks.cpp — every number and name a training run takes is checked where it
// enters (issue 52): hyperparameters in their meaningful ranges (NaN and infinities refused),
// --hyp and --config read one way (a repeated key is refused with its lines), run names that
// stay inside --project; and a resume that restores the run's devices and takes more epochs
// but not fewer.
#include <cmath>
#include <limits>

#include "models/train/checkpoint.h"
#include "models/train/flat_yaml.h"
#include "models/train/options.h"
#include "models/train/run_dir.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// load_hyp_yaml's message for a hyp file holding `text`; "" when it is accepted.
std::string hyp_refusal(const std::string& text) {
  TempDir dir;
  const fs::path hyp = dir.path() / "hyp.yaml";
  write_text(hyp, text);
  models::TrainOptions options;
  try {
    models::load_hyp_yaml(hyp.string(), options);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("--hyp: values outside their meaningful range are refused with file, line and range") {
  CHECK(hyp_refusal("lr0: 0.02\nmomentum: 0.9\nanchor_t: 2.9\nscale: 0.9\n").empty());
  CHECK(hyp_refusal("lr0: 0.01\nlr0: -0.01\n").find("'lr0' is given twice (first on line 1)") !=
        std::string::npos);
  const std::string negative = hyp_refusal("box: 0.05\nlr0: -0.01\n");
  CHECK(negative.find("hyp.yaml:2: lr0 = -0.01 must be > 0 (the initial learning rate)") !=
        std::string::npos);
  CHECK(hyp_refusal("lr0: .nan\n").find("lr0 = nan must be > 0") != std::string::npos);
  CHECK(hyp_refusal("weight_decay: .inf\n").find("weight_decay = inf must be in [0, 1)") !=
        std::string::npos);
  CHECK(hyp_refusal("momentum: 1.0\n").find("momentum = 1 must be in [0, 1)") != std::string::npos);
  // anchor_t is a size-ratio threshold: max(r, 1/r) < anchor_t never holds at anchor_t <= 1.
  CHECK(hyp_refusal("anchor_t: 0\n").find("anchor_t = 0 must be > 1") != std::string::npos);
  CHECK(hyp_refusal("anchor_t: 1\n").find("anchor_t = 1 must be > 1") != std::string::npos);
  CHECK(hyp_refusal("fliplr: 1.5\n").find("fliplr = 1.5 must be in [0, 1]") != std::string::npos);
  CHECK(hyp_refusal("lrf:\n").find("hyp.yaml:1: 'lrf' has no value") != std::string::npos);
}

TEST_CASE("the C++ API's hyperparameters are checked with the same ranges") {
  models::TrainOptions options;
  CHECK_NOTHROW(models::check_hyp(options));  // YOLOv5's defaults
  options.schedule.lr0 = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH_AS(models::check_hyp(options),
                       doctest::Contains("hyperparameter lr0 = nan must be > 0"),
                       std::invalid_argument);
  options.schedule.lr0 = 0.01;
  options.loss.anchor_t = 0;
  CHECK_THROWS_WITH_AS(models::check_hyp(options), doctest::Contains("anchor_t = 0 must be > 1"),
                       std::invalid_argument);
}

TEST_CASE(
    "flat yaml: entries in file order with their lines, and a repeated key names both lines") {
  TempDir dir;
  const fs::path file = dir.path() / "flags.yaml";
  write_text(file, "epochs: 2\n# a comment\nbatch: 8\n");
  const std::vector<models::FlatYamlEntry> entries = models::read_flat_yaml(file.string(), "--x");
  REQUIRE(entries.size() == 2);
  CHECK(entries[1].key == "batch");
  CHECK(entries[1].line == 3);
  write_text(file, "epochs: 2\nbatch: 8\nepochs: 3\n");
  CHECK_THROWS_WITH_AS(models::read_flat_yaml(file.string(), "--config"),
                       doctest::Contains(("--config " + file.string() +
                                          ":3: 'epochs' is given twice (first on line 1); keep one")
                                             .c_str()),
                       std::invalid_argument);
  write_text(file, "epochs: [2, 3]\n");
  CHECK_THROWS_WITH_AS(models::read_flat_yaml(file.string(), "--config"),
                       doctest::Contains(":1: 'epochs' must be a single value"),
                       std::invalid_argument);
}

TEST_CASE("run names stay one folder inside --project, refused before anything is created") {
  TempDir dir;
  const std::string project = (dir.path() / "runs").string();
  for (const std::string name : {"", ".", "..", "../x", "/abs", "a/b", "--exist-ok"}) {
    CAPTURE(name);
    CHECK_THROWS_WITH_AS(
        models::resolve_run_dir(project, name, false),
        doctest::Contains(("--name '" + name + "': a run name must be one folder").c_str()),
        std::invalid_argument);
  }
  CHECK_FALSE(fs::exists(project));  // nothing was created for a refused name
  CHECK(models::resolve_run_dir(project, "exp.v2", false) == project + "/exp.v2");
}

namespace {

// A checkpoint holding only metadata (no tensors are needed to resolve a request), its run
// configured by `configured`, saved at `path`.
void write_metadata_checkpoint(const std::string& path, const models::TrainOptions& configured,
                               std::optional<models::SavedLaunch> launch) {
  models::CheckpointInfo info;
  info.progress.epoch = 1;
  info.progress.best_epoch = 0;
  info.progress.best_fitness = 0.5;
  info.solver.optimizer = "SGD";
  info.nc = 2;
  info.config_json = models::options_to_json(configured);
  info.launch = std::move(launch);
  models::make_checkpoint({}, info).save(path);
}

}  // namespace

TEST_CASE("resume: the run's devices come back unless the request names its own") {
  TempDir dir;
  fs::create_directories(dir.path() / "run" / "weights");
  const std::string path = (dir.path() / "run" / "weights" / "last.safetensors").string();
  models::TrainOptions configured;
  configured.epochs = 5;
  write_metadata_checkpoint(path, configured, models::SavedLaunch{"cpu", 0, 1});

  models::TrainOptions request;  // device "auto": as the run was started
  request.resume = path;
  models::TrainOptions resolved = models::resolved_request(request);
  CHECK(resolved.device.text == "cpu");
  CHECK(resolved.nproc_per_node == 0);
  CHECK(models::read_checkpoint_info(SafetensorsFile::load(path), path).launch->world_size == 1);

  request.device = "0";  // named: the request's
  CHECK(models::resolved_request(request).device.text == "0");
  request.device = "auto";
  request.nproc_per_node = 3;
  CHECK(models::resolved_request(request).device.text == "auto");

  // A checkpoint written before the launch was saved resumes on the request's devices.
  write_metadata_checkpoint(path, configured, std::nullopt);
  models::TrainOptions old_request;
  old_request.resume = path;
  CHECK_FALSE(models::read_checkpoint_info(SafetensorsFile::load(path), path).launch);
  CHECK(models::resolved_request(old_request).device.text == "auto");
}

TEST_CASE("resume: more epochs are applied, fewer refused") {
  TempDir dir;
  const std::string path = (dir.path() / "last.safetensors").string();
  models::TrainOptions configured;
  configured.epochs = 5;
  write_metadata_checkpoint(path, configured, std::nullopt);
  models::TrainOptions request;
  request.resume = path;
  request.resume_changes.epochs = 8;
  CHECK(models::resolved_request(request).epochs == 8);
  request.resume_changes.epochs = 3;
  CHECK_THROWS_WITH_AS(models::resolved_request(request),
                       doctest::Contains("epochs 3 is fewer than the run's 5"),
                       std::invalid_argument);
}
