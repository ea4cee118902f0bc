// tests/unit/checkpoint.cpp — training checkpoints: what they hold and that it round-trips
// exactly, that plain weights are refused for resuming, that a failed write leaves the
// previous file intact, periodic-checkpoint pruning, and the invariant they exist for:
// kill-and-resume (--max-steps, then --resume) ends with the same weights, bit for bit, as an
// uninterrupted run — mid-epoch and at an epoch boundary, with SGD and with AdamW + freeze.
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "data/shapes.h"
#include "engine/shipped_files.h"
#include "models/train/checkpoint.h"
#include "models/train/launch.h"
#include "models/train/run_dir.h"
#include "models/train/run_lock.h"
#include "models/train/solver.h"
#include "models/train/trainer.h"
#include "models/yolo/weights.h"
#include "tests/support/data_fixtures.h"
#include "tests/support/kept_checkpoint.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// Looked up when a test runs, not at start-up: a test binary must list its cases anywhere.
std::string tiny_cfg() { return shipped_file("models/yolov5-tiny.yaml"); }

models::DetectionModel tiny_model(uint64_t seed) {
  return models::DetectionModel(models::load_model_config(tiny_cfg()), {.nc = 2, .seed = seed});
}

// results.csv without its last column, x/data_wait: a measured time, not a training result.
std::string without_timing(const std::string& csv) {
  std::string kept;
  size_t start = 0;
  for (size_t end; (end = csv.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = csv.substr(start, end - start);
    kept += line.substr(0, line.rfind(',')) + "\n";
  }
  return kept;
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A small shapes dataset (16 train, 4 val images of 64 px, 2 classes), once per test binary.
const std::string& shapes_yaml() {
  static TempDir dir;
  static const std::string yaml =
      data::make_shapes_dataset({.out = (dir.path() / "shapes").string(),
                                 .n_train = 16,
                                 .n_val = 4,
                                 .imgsz = 64,
                                 .classes = 2});
  return yaml;
}

models::TrainOptions tiny_run(const fs::path& run_dir) {
  models::TrainOptions o;
  o.data = shapes_yaml();
  o.cfg = tiny_cfg();
  o.run_dir = run_dir.string();
  o.epochs = 3;
  o.batch = 4;  // 4 batches per epoch
  o.nbs = 64;   // warmup ramps accumulation 1 -> 16 over 100 iterations: 2 from iteration 4
  o.imgsz = 64;
  o.workers = 2;
  o.validate = false;
  o.show_progress = false;
  return o;
}

void quiet(const std::string&) {}

// Every tensor of a checkpoint (weights, EMA, optimizer state) as bytes, by name.
std::map<std::string, std::vector<uint8_t>> tensors_of(const fs::path& path) {
  std::map<std::string, std::vector<uint8_t>> tensors;
  const SafetensorsFile file = SafetensorsFile::load(path.string());
  for (const TensorRecord& r : file.records()) tensors[r.name] = r.bytes;
  return tensors;
}

// An uninterrupted run against one stopped by --max-steps at `stop_step` and resumed.
// Both runs' last checkpoints are compared as they were written at the end, full (the
// finished runs then strip last.safetensors to its weights).
void check_resume_is_bitwise(models::TrainOptions options, int64_t stop_step) {
  TempDir dir;
  const fs::path whole_last = dir.path() / "whole-last.safetensors",
                 split_last = dir.path() / "split-last.safetensors";
  options.run_dir = (dir.path() / "whole").string();
  options.callbacks = {keep_last_checkpoint(whole_last)};
  const models::TrainSummary whole = models::train(options, quiet);
  REQUIRE(whole.finished);
  CHECK(whole.optimizer_steps == 7);

  options.run_dir = (dir.path() / "split").string();
  options.max_steps = stop_step;
  options.callbacks = {keep_last_checkpoint(split_last)};
  const models::TrainSummary first = models::train(options, quiet);
  CHECK_FALSE(first.finished);
  CHECK(first.optimizer_steps == stop_step);
  CHECK_FALSE(fs::exists(dir.path() / "split" / "weights" / "final.safetensors"));

  models::TrainOptions resume;
  resume.resume = (dir.path() / "split" / "weights" / "last.safetensors").string();
  resume.show_progress = false;
  resume.epochs = 1000;  // ignored: the checkpoint's configuration wins
  resume.callbacks = {keep_last_checkpoint(split_last)};
  const models::TrainSummary rest = models::train(resume, quiet);
  CHECK(rest.finished);
  CHECK(rest.optimizer_steps == whole.optimizer_steps);
  CHECK(fs::equivalent(rest.run_dir, dir.path() / "split"));

  const auto expected = tensors_of(whole_last);
  const auto resumed = tensors_of(split_last);
  REQUIRE(expected.size() == resumed.size());
  CHECK(expected.count("optimizer.momentum_buffer.model.0.conv.weight") +
            expected.count("optimizer.exp_avg.model.24.m.0.weight") ==
        1);  // the full checkpoint: optimizer state compared too
  int differing = 0;
  for (const auto& [name, bytes] : expected) {
    REQUIRE(resumed.count(name));
    if (resumed.at(name) != bytes) {
      ++differing;
      MESSAGE("differs: " << name);
    }
  }
  CHECK(differing == 0);
  CHECK(tensors_of(dir.path() / "whole" / "weights" / "final.safetensors") ==
        tensors_of(dir.path() / "split" / "weights" / "final.safetensors"));
  CHECK(without_timing(file_bytes(dir.path() / "whole" / "results.csv")) ==
        without_timing(file_bytes(dir.path() / "split" / "results.csv")));
}

}  // namespace

TEST_CASE("a checkpoint round-trips every tensor and counter exactly") {
  models::DetectionModel model = tiny_model(1), ema_model = tiny_model(2);
  std::vector<StateEntry> state = model.state();
  Tensor momentum = Tensor::from_vector(std::vector<float>{0.25f, -1.5f, 3.0f}, {1, 1, 1, 3});
  models::CheckpointInfo info;
  info.progress = {.epoch = 2,
                   .this_epoch = {.batches_done = 5, .loss_mean = {0.1, 0.2, 1.0 / 3}},
                   .best_fitness = 0.125,
                   .best_epoch = 1};
  info.solver = {.optimizer_steps = 17,
                 .last_step_iteration = 20,
                 .ema_updates = 17,
                 .optimizer = "SGD",
                 .optimizer_updates = 17};
  info.config_json = R"({"epochs": 3})";
  info.history = {{.epoch = 0, .train_box = 0.5, .map50 = 0.25, .lr0 = 0.01, .validated = true},
                  {.epoch = 1, .train_box = 0.4, .map50 = 1.0 / 3, .validated = true}};
  info.nc = 2;
  info.names = {"circle", "rectangle"};
  info.seed = 7;
  info.launch = models::SavedLaunch{.device = "cpu",
                                    .world_size = 1,
                                    .amp = true,
                                    .tf32 = false,
                                    .winograd = false,
                                    .bf16_grad_buckets = true,
                                    .cudnn_deterministic = false};
  const models::CheckpointTensors saved{
      ema_model.state(), state, {{"momentum_buffer.x", &momentum}}};
  TempDir dir;
  const std::string path = (dir.path() / "c.safetensors").string();
  models::make_checkpoint(saved, info).save(path);

  const SafetensorsFile file = SafetensorsFile::load(path);
  CHECK(file.contains("model.0.conv.weight"));        // the EMA: what val/predict load
  CHECK(file.contains("train.model.0.conv.weight"));  // raw training weights
  CHECK(file.contains("optimizer.momentum_buffer.x"));
  CHECK(file.metadata().at("nc") == "2");
  const models::CheckpointInfo read = models::read_checkpoint_info(file, path);
  CHECK(read.progress.epoch == 2);
  CHECK(read.progress.this_epoch.batches_done == 5);
  CHECK(read.solver.optimizer_steps == 17);
  CHECK(read.solver.last_step_iteration == 20);
  CHECK(read.progress.this_epoch.loss_mean[2] == 1.0 / 3);  // doubles survive exactly
  CHECK(read.progress.best_fitness == 0.125);
  CHECK(read.progress.best_epoch == 1);
  CHECK(read.solver.ema_updates == 17);
  CHECK(read.config_json == info.config_json);
  CHECK(read.names == info.names);
  CHECK(read.seed == 7);
  REQUIRE(read.history.size() == 2);
  CHECK(read.history[1].map50 == 1.0 / 3);
  CHECK(read.history[0].validated);
  // The launch's devices and numerics, which a resumed run takes back.
  REQUIRE(read.launch);
  CHECK(read.launch->device == "cpu");
  CHECK((read.launch->amp && !read.launch->winograd && read.launch->bf16_grad_buckets));
  CHECK_FALSE(read.launch->cudnn_deterministic);
  // A checkpoint from before --cudnn: its run kept to deterministic algorithms, as it resumes.
  SafetensorsFile older = SafetensorsFile::load(path);
  nlohmann::json launch = nlohmann::json::parse(older.metadata().at("launch"));
  REQUIRE(launch.erase("cudnn_deterministic") == 1);
  older.metadata()["launch"] = launch.dump();
  CHECK(models::read_checkpoint_info(older, path).launch->cudnn_deterministic);
  // A class count no model has (a damaged file) is refused, not wrapped into an int.
  SafetensorsFile damaged = SafetensorsFile::load(path);
  damaged.metadata()["nc"] = "2147483648";
  CHECK_THROWS_WITH_AS(models::read_checkpoint_info(damaged, path),
                       doctest::Contains("metadata 'nc' is 2147483648, outside 1.."),
                       std::invalid_argument);

  // Restore into different models: every value comes back bit for bit.
  models::DetectionModel model2 = tiny_model(3), ema2 = tiny_model(4);
  Tensor momentum2 = Tensor::zeros({1, 1, 1, 3});
  models::restore_checkpoint(
      file, {ema2.state(), model2.state(), {{"momentum_buffer.x", &momentum2}}}, path);
  CHECK(momentum2.to_vector<float>() == momentum.to_vector<float>());
  std::vector<StateEntry> a = model.state(), b = model2.state(), c = ema_model.state(),
                          d = ema2.state();
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].value->to_doubles() == b[i].value->to_doubles());
    CHECK(c[i].value->to_doubles() == d[i].value->to_doubles());
  }
  // A checkpoint of another optimizer's buffers is refused before anything is copied.
  CHECK_THROWS_WITH_AS(models::restore_checkpoint(
                           file, {ema2.state(), model2.state(), {{"exp_avg.x", &momentum2}}}, path),
                       doctest::Contains("missing 'optimizer.exp_avg.x'"), std::invalid_argument);
}

TEST_CASE("checkpoint metadata: a count that is no whole number of its type is refused") {
  // nlohmann's get<int>() of 3e88 is undefined behaviour (found by fuzz/checkpoint_metadata.cpp)
  // and of 1.5 a silent 1: every count read from a checkpoint is checked.
  const std::string path = shipped_file("tests/fixtures/checkpoints/sgd-step3.safetensors");
  const SafetensorsFile fixture = SafetensorsFile::load_metadata(path);
  REQUIRE(models::read_checkpoint_info(fixture, path).progress.this_epoch.batches_done == 3);
  struct Damage {
    std::string key, value, message;
  };
  for (const Damage& damage : std::vector<Damage>{
           {"progress", "3.3e88", "progress 'epoch' is 3.3e+88, not a whole number from"},
           {"progress", "1.5", "progress 'epoch' is 1.5, not a whole number"},
           {"progress", "4294967296", "progress 'epoch' is 4294967296, not a whole number"},
           {"rng", "-1", "rng 'seed' is -1, not a whole number from 0 to"}}) {
    CAPTURE(damage.value);
    SafetensorsFile damaged = fixture;
    nlohmann::json entry = nlohmann::json::parse(damaged.metadata().at(damage.key));
    entry[damage.key == "progress" ? "epoch" : "seed"] = nlohmann::json::parse(damage.value);
    damaged.metadata()[damage.key] = entry.dump();
    CHECK_THROWS_WITH_AS(models::read_checkpoint_info(damaged, path),
                         doctest::Contains(damage.message.c_str()), std::invalid_argument);
  }
  // The saved configuration's counts too.
  nlohmann::json config = nlohmann::json::parse(fixture.metadata().at("config"));
  config["epochs"] = 1e300;
  models::TrainOptions options;
  CHECK_THROWS_WITH_AS(
      models::options_from_json(config.dump(), options),
      doctest::Contains("the saved configuration's 'epochs' is 1e+300, not a whole number"),
      std::invalid_argument);
}

TEST_CASE("plain weights are not a checkpoint to resume from") {
  models::DetectionModel model = tiny_model(1);
  const SafetensorsFile weights = models::make_weights_file(model.state(), 2, {"a", "b"});
  CHECK_THROWS_WITH_AS(models::read_checkpoint_info(weights, "w.safetensors"),
                       doctest::Contains("weights only"), std::invalid_argument);
}

TEST_CASE("a failed checkpoint write leaves the previous checkpoint intact") {
  models::DetectionModel model = tiny_model(1);
  models::CheckpointInfo info;
  info.solver.optimizer = "SGD";
  info.nc = 2;
  TempDir dir;
  const fs::path path = dir.path() / "last.safetensors";
  models::make_checkpoint({model.state(), model.state(), {}}, info).save(path.string());
  const std::string before = file_bytes(path);

  // Inject "disk full": a file-size limit makes write() fail with EFBIG (works as root too).
  info.progress.epoch = 1;
  const SafetensorsFile next = models::make_checkpoint({model.state(), model.state(), {}}, info);
  rlimit old_limit{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  const auto old_handler = signal(SIGXFSZ, SIG_IGN);
  rlimit small = old_limit;
  small.rlim_cur = 4096;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  bool threw = false;
  try {
    next.save(path.string());
  } catch (const std::runtime_error& e) {
    threw = true;
    CHECK(std::string(e.what()).find("unchanged") != std::string::npos);
  }
  REQUIRE(setrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  signal(SIGXFSZ, old_handler);
  CHECK(threw);
  CHECK(file_bytes(path) == before);
  int leftovers = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) leftovers += entry.path() != path;
  CHECK(leftovers == 0);  // the temporary file is gone

  // An unwritable place (a file where the directory should be) is an error naming the path.
  write_text(dir.path() / "not-a-dir", "x");
  CHECK_THROWS_WITH_AS(next.save((dir.path() / "not-a-dir" / "last.safetensors").string()),
                       doctest::Contains("not-a-dir"), std::runtime_error);
}

TEST_CASE("pruning keeps the newest periodic checkpoints only") {
  TempDir dir;
  for (const char* name :
       {"epoch1.safetensors", "step4.safetensors", "epoch2.safetensors", "step8.safetensors"}) {
    write_text(dir.path() / name, name);
    std::this_thread::sleep_for(std::chrono::milliseconds(25));  // past the clock tick of mtimes
  }
  write_text(dir.path() / "last.safetensors", "last");
  const std::vector<std::string> removed =
      models::prune_periodic_checkpoints(dir.path().string(), 2);
  CHECK(removed.size() == 2);
  CHECK_FALSE(fs::exists(dir.path() / "epoch1.safetensors"));
  CHECK_FALSE(fs::exists(dir.path() / "step4.safetensors"));
  CHECK(fs::exists(dir.path() / "epoch2.safetensors"));
  CHECK(fs::exists(dir.path() / "step8.safetensors"));
  CHECK(fs::exists(dir.path() / "last.safetensors"));  // never a periodic one
  CHECK(models::prune_periodic_checkpoints(dir.path().string(), 0).empty());  // 0 keeps all
}

TEST_CASE("kill and resume mid-epoch equals an uninterrupted run bit for bit (SGD)") {
  // 3 epochs x 4 batches; with warmup's accumulation ramp, steps come after iterations
  // 0 1 2 3 | 5 7 | 9 (7 in all). Step 5 (iteration 5) stops in the middle of epoch 1, and
  // the batch after it accumulates without a step.
  check_resume_is_bitwise(tiny_run(""), 5);
}

TEST_CASE("kill and resume equals an uninterrupted run bit for bit (AdamW, freeze, cosine)") {
  models::TrainOptions options = tiny_run("");
  options.optimizer = models::OptimizerKind::adamw;
  options.schedule.lr0 = 0.001;
  options.freeze = 2;
  options.schedule.cosine = true;
  options.validate = true;
  check_resume_is_bitwise(options, 4);  // step 4 = epoch 0's last batch: resumes at its end
}

TEST_CASE("frozen layers keep their weights and resuming a finished run is refused") {
  TempDir dir;
  models::TrainOptions options = tiny_run(dir.path() / "run");
  options.epochs = 1;
  options.freeze = 3;
  const fs::path kept = dir.path() / "kept-last.safetensors";  // as written, before the strip
  options.callbacks = {keep_last_checkpoint(kept)};
  models::DetectionModel initial = tiny_model(options.seed);
  models::train(options, quiet);
  const SafetensorsFile last = SafetensorsFile::load(kept.string());
  const std::vector<StateEntry> state = initial.state();
  const std::vector<bool> frozen = models::frozen_entries(state, options.freeze);
  int frozen_params = 0, moved_params = 0;
  for (size_t i = 0; i < state.size(); ++i) {
    if (!state[i].trainable()) continue;
    INFO(state[i].name);
    const bool same =
        last.tensor("train." + state[i].name).to_doubles() == state[i].value->to_doubles();
    const std::string momentum = "optimizer.momentum_buffer." + state[i].name;
    CHECK(last.contains(momentum) == !frozen[i]);
    if (frozen[i]) {
      CHECK(same);
    } else {
      // Trained: it got gradients. (Its value may still round back to the start after the
      // warmup's tiny first learning rates, e.g. a BN weight of 1.0, so the momentum says it.)
      const std::vector<double> buffer = last.tensor(momentum).to_doubles();
      CHECK(std::any_of(buffer.begin(), buffer.end(), [](double v) { return v != 0; }));
    }
    frozen_params += frozen[i], moved_params += !same;
  }
  CHECK(frozen_params > 0);
  CHECK(moved_params > 0);
  CHECK(frozen[0]);  // model.0.conv.weight
  CHECK(state[0].name.rfind("model.0.", 0) == 0);

  models::TrainOptions again;
  again.resume = (dir.path() / "run" / "weights" / "last.safetensors").string();
  CHECK_THROWS_WITH_AS(models::train(again, quiet), doctest::Contains("already finished"),
                       std::invalid_argument);
  again.resume = kept.string();  // the full checkpoint of the finished run: refused as well
  CHECK_THROWS_WITH_AS(models::train(again, quiet), doctest::Contains("already finished"),
                       std::invalid_argument);
}

// YOLOv5's strip_optimizer: fp16 rounds to nearest with 11 significant bits, so a stripped
// value is within 2^-11 of its float (relative), and the normal range holds these weights.
TEST_CASE("a finished run strips last and best to fp16 EMA weights, and says so on --resume") {
  TempDir dir;
  models::TrainOptions options = tiny_run(dir.path() / "run");
  options.epochs = 1;
  const fs::path kept = dir.path() / "kept-last.safetensors";
  options.callbacks = {keep_last_checkpoint(kept)};
  REQUIRE(models::train(options, quiet).finished);
  const SafetensorsFile full = SafetensorsFile::load(kept.string());
  REQUIRE(full.metadata().count("checkpoint"));

  for (const char* name : {"last.safetensors", "best.safetensors"}) {
    INFO(name);
    const std::string path = (dir.path() / "run" / "weights" / name).string();
    const SafetensorsFile stripped = SafetensorsFile::load(path);
    CHECK_FALSE(stripped.metadata().count("checkpoint"));
    CHECK(stripped.metadata().at("finished_epochs") == "1");
    CHECK(stripped.metadata().at("nc") == "2");
    CHECK(stripped.metadata().at("yaml") == full.metadata().at("yaml"));
    size_t weights = 0;
    for (const TensorRecord& record : full.records())
      weights += record.name.rfind("train.", 0) != 0 && record.name.rfind("optimizer.", 0) != 0;
    CHECK(stripped.records().size() == weights);
    int halves = 0;
    for (const TensorRecord& record : stripped.records()) {
      INFO(record.name);
      REQUIRE(full.contains(record.name));
      if (record.dtype == "I64") {  // BatchNorm's counters, as they were
        CHECK(record.bytes == full.record(record.name).bytes);
        continue;
      }
      REQUIRE(record.dtype == "F16");
      ++halves;
      const std::vector<double> got = stripped.float_tensor(record.name).to_doubles();
      const std::vector<double> want = full.float_tensor(record.name).to_doubles();
      REQUIRE(got.size() == want.size());
      for (size_t k = 0; k < got.size(); ++k)
        REQUIRE(std::abs(got[k] - want[k]) <= std::ldexp(std::abs(want[k]), -11) + 1e-7);
    }
    CHECK(halves > 50);
    models::TrainOptions again;
    again.resume = path;
    const std::string refusal = path +
                                ": this run already finished (1 epochs); nothing to resume. To "
                                "train further, start a new run from its weights: --weights " +
                                path;
    CHECK_THROWS_WITH_AS(models::train(again, quiet), refusal.c_str(), std::invalid_argument);
  }
  // best = last here (the one epoch): the same stripped weights.
  CHECK(tensors_of(dir.path() / "run" / "weights" / "last.safetensors") ==
        tensors_of(dir.path() / "run" / "weights" / "best.safetensors"));
}

TEST_CASE("--nosave: no checkpoint while the run trains, then last and best at its end") {
  TempDir dir;
  models::TrainOptions options = tiny_run(dir.path() / "run");
  options.epochs = 2;
  options.validate = true;
  options.nosave = true;
  const fs::path weights = dir.path() / "run" / "weights";
  std::vector<std::string> events;
  models::TrainCallbacks recorder;
  recorder.on_train_epoch_start = [&](const models::EpochStartInfo& info) {
    // Had the run been killed here, nothing would be left to resume from.
    if (info.epoch > 0) CHECK(fs::is_empty(weights));
  };
  recorder.on_fit_epoch_end = [&](const models::EpochMetrics& m) {
    events.push_back("fit " + std::to_string(m.epoch));
  };
  recorder.on_model_save = [&](const std::string& path) {
    events.push_back("save " + fs::path(path).filename().string());
  };
  options.callbacks = {recorder};
  REQUIRE(models::train(options, quiet).finished);
  // best after the end's last: the best epoch's (held since), or this one's.
  const std::vector<std::string> expected = {"fit 0", "fit 1", "save last.safetensors",
                                             "save best.safetensors", "save final.safetensors"};
  CHECK(events == expected);
  for (const char* name : {"last.safetensors", "best.safetensors", "final.safetensors"})
    CHECK(fs::exists(weights / name));

  // Stopped by --max-steps, the run ends there: its last is written then, and resumes.
  options.run_dir = (dir.path() / "stopped").string();
  options.max_steps = 5;  // in epoch 1
  options.callbacks.clear();
  CHECK_FALSE(models::train(options, quiet).finished);
  models::TrainOptions again;
  again.resume = (dir.path() / "stopped" / "weights" / "last.safetensors").string();
  again.show_progress = false;
  CHECK(models::train(again, quiet).finished);

  // What needs the checkpoints it leaves out is refused, before anything is written.
  options.run_dir = (dir.path() / "refused").string();
  options.save_period = 1;
  CHECK_THROWS_WITH_AS(models::run_training(options, quiet),
                       "--nosave writes no checkpoint before the run ends, which --save-period 1 "
                       "needs; drop one of them",
                       std::invalid_argument);
  CHECK_FALSE(fs::exists(dir.path() / "refused"));
}

TEST_CASE("a resumed request takes the checkpoint's configuration, and the trainer checks it") {
  TempDir dir;
  models::TrainOptions options = tiny_run(dir.path() / "run");
  options.max_steps = 2;
  models::train(options, quiet);
  const fs::path moved = dir.path() / "moved";
  fs::rename(dir.path() / "run", moved);

  models::TrainOptions request;
  request.resume = (moved / "weights" / "last.safetensors").string();
  request.epochs = 1000;
  request.batch = 6;
  request.show_progress = false;
  const models::TrainOptions resolved = models::resolved_request(request);
  CHECK(resolved.epochs == options.epochs);
  CHECK(resolved.batch == options.batch);
  CHECK(resolved.cfg == options.cfg);
  CHECK(fs::path(resolved.run_dir) == fs::absolute(moved).lexically_normal());
  CHECK(resolved.resume == request.resume);

  // The trainer refuses a request that skipped the resolution, and a RunContext whose batch
  // plan is not the request's, before it trains a step.
  CHECK_THROWS_WITH_AS(
      models::train(
          request,
          {.run_dir = resolved.run_dir, .batch = models::plan_batch(request.batch, 1, request.nbs)},
          quiet),
      doctest::Contains("differ from the checkpoint's configuration"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      models::train(resolved,
                    {.run_dir = resolved.run_dir,
                     .batch = models::plan_batch(resolved.batch * 2, 1, resolved.nbs)},
                    quiet),
      doctest::Contains("RunContext::batch is not plan_batch(batch=4"), std::invalid_argument);
  CHECK(models::train(request, quiet).finished);  // the convenience entry resolves it
}

TEST_CASE("a run that is still training cannot be resumed, and a failed start leaves no run") {
  TempDir dir;
  models::TrainOptions options = tiny_run(dir.path() / "run");
  options.max_steps = 2;
  options.device.text = "cpu";
  models::run_training(options, quiet);
  const fs::path last = dir.path() / "run" / "weights" / "last.safetensors";
  models::TrainOptions resume;
  resume.resume = last.string();
  resume.show_progress = false;
  {
    const models::RunDirLock busy((dir.path() / "run").string());  // as a job still training
    CHECK_THROWS_WITH_AS(models::run_training(resume, quiet),
                         doctest::Contains("belongs to a job that is still running"),
                         std::runtime_error);
  }
  CHECK(models::run_training(resume, quiet).finished);

  // A start that fails in the trainer (here: --weights that do not exist) removes the run
  // directory it created (before: an empty runs/exp, and the next run was numbered exp2).
  models::TrainOptions failing = tiny_run("");
  failing.project = (dir.path() / "runs").string();
  failing.device.text = "cpu";
  failing.weights = (dir.path() / "missing.safetensors").string();
  CHECK_THROWS(models::run_training(failing, quiet));
  CHECK_FALSE(fs::exists(dir.path() / "runs" / "exp"));
  failing.weights.clear();
  failing.max_steps = 1;
  CHECK(fs::path(models::run_training(failing, quiet).run_dir).filename() == "exp");
}

TEST_CASE("skipped images are counted and shown before training, and --strict refuses them") {
  // Before: 2 of 16 images dropped, and the log said only "on 14 images".
  TempDir dir;
  const std::string yaml = data::make_shapes_dataset({.out = (dir.path() / "shapes").string(),
                                                      .n_train = 16,
                                                      .n_val = 4,
                                                      .imgsz = 64,
                                                      .classes = 2});
  write_text(dir.path() / "shapes" / "labels" / "train" / "000003.txt", "7 0.5 0.5 0.2 0.2\n");
  write_text(dir.path() / "shapes" / "images" / "train" / "000005.jpg", "not a jpeg");
  models::TrainOptions options = tiny_run(dir.path() / "run");
  options.data = yaml;
  options.device.text = "cpu";
  options.max_steps = 1;
  std::string log;
  models::run_training(options, [&](const std::string& line) { log += line + "\n"; });
  CHECK(log.find("train: 2 of 16 images skipped (unreadable, or a label that cannot be used) "
                 "and 0 warning(s) on the images kept:") != std::string::npos);
  CHECK(log.find("000003.txt:1: class 7 is out of range") != std::string::npos);
  INFO(log);
  CHECK(log.find("000005.jpg: unreadable image: unknown image type (image skipped)") !=
        std::string::npos);
  CHECK(log.find("on 14 images") != std::string::npos);

  options.strict = true;
  options.run_dir = (dir.path() / "strict").string();
  const std::string refusal = "--strict: the train split of " + yaml + " has 2 problem(s)";
  CHECK_THROWS_WITH_AS(models::run_training(options, quiet), doctest::Contains(refusal.c_str()),
                       std::invalid_argument);
  CHECK_FALSE(fs::exists(dir.path() / "strict"));
}

TEST_CASE("callbacks fire in order on rank 0, and any other rank writes and fires nothing") {
  TempDir dir;
  models::TrainOptions options = tiny_run(dir.path() / "run");
  options.epochs = 2;
  options.save_steps = 3;
  options.save_total_limit = 1;
  std::vector<std::string> events;
  models::TrainCallbacks recorder;
  recorder.on_train_start = [&](const models::TrainStartInfo& i) {
    events.push_back("start " + std::to_string(i.start_epoch));
  };
  recorder.on_epoch_end = [&](int e) { events.push_back("epoch " + std::to_string(e)); };
  recorder.on_fit_epoch_end = [&](const models::EpochMetrics& m) {
    events.push_back("fit " + std::to_string(m.epoch));
  };
  recorder.on_model_save = [&](const std::string& path) {
    events.push_back("save " + fs::path(path).filename().string());
  };
  recorder.on_train_end = [&](const models::TrainEndInfo& i) {
    events.push_back(std::string("end ") + (i.finished ? "finished" : "stopped"));
  };
  options.callbacks = {recorder};
  int log_lines = 0;
  models::train(options, [&](const std::string&) { ++log_lines; });
  // 8 batches, steps after iterations 0 1 2 3 | 5 7: step 3 in epoch 0, step 6 in epoch 1.
  const std::vector<std::string> expected = {"start 0",
                                             "save step3.safetensors",
                                             "save last.safetensors",
                                             "epoch 0",
                                             "fit 0",
                                             "save last.safetensors",  // not validated: no best
                                             "save step6.safetensors",
                                             "save last.safetensors",
                                             "epoch 1",
                                             "fit 1",
                                             "save last.safetensors",
                                             "save best.safetensors",
                                             "save final.safetensors",
                                             "end finished"};
  CHECK(events == expected);
  CHECK(log_lines > 0);
  const fs::path weights = dir.path() / "run" / "weights";
  CHECK_FALSE(fs::exists(weights / "step3.safetensors"));  // --save-total-limit 1
  CHECK(fs::exists(weights / "step6.safetensors"));
  for (const char* file : {"results.csv", "results.jsonl", "report.html"})
    CHECK(fs::exists(dir.path() / "run" / file));

  // The same run as rank 1 of 2 (no communicator: it only computes its half of each batch).
  events.clear();
  log_lines = 0;
  const models::TrainSummary summary =
      models::train(options,
                    {.run_dir = (dir.path() / "rank1").string(),
                     .rank = 1,
                     .world_size = 2,
                     .batch = models::plan_batch(options.batch, 2, options.nbs)},
                    [&](const std::string&) { ++log_lines; });
  CHECK(summary.finished);
  CHECK(events.empty());
  CHECK(log_lines == 0);
  CHECK_FALSE(fs::exists(dir.path() / "rank1"));
}
