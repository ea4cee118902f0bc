// tests/unit/train_options.cpp — YOLOv5 hyp yamls (--hyp) and the configuration that
// checkpoints carry (every saved field round-trips; what is not saved stays the caller's).
#include <sched.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "engine/distributed/comm/store.h"
#include "engine/shipped_files.h"
#include "models/train/options.h"
#include "models/train/solver.h"
#include "models/train/trainer.h"
#include "models/yolo/yolo_model.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("a YOLOv5 hyp yaml sets the schedule, loss gains and augmentation") {
  TempDir dir;
  const fs::path hyp = dir.path() / "hyp.yaml";
  write_text(hyp,
             "lr0: 0.02\nlrf: 0.1\nmomentum: 0.9\nweight_decay: 0.001\nwarmup_epochs: 2.0\n"
             "warmup_momentum: 0.7\nwarmup_bias_lr: 0.05\nbox: 0.06\ncls: 0.3\ncls_pw: 1.1\n"
             "obj: 0.7\nobj_pw: 1.2\niou_t: 0.2\nanchor_t: 3.5\nfl_gamma: 1.5\nhsv_h: 0.01\n"
             "hsv_s: 0.6\nhsv_v: 0.3\ndegrees: 1.0\ntranslate: 0.2\nscale: 0.9\nshear: 0.5\n"
             "perspective: 0.0\nflipud: 0.1\nfliplr: 0.4\nmosaic: 0.8\nmixup: 0.0\n"
             "copy_paste: 0.0\n");
  models::TrainOptions o;
  models::load_hyp_yaml(hyp.string(), o);
  CHECK(o.schedule.lr0 == 0.02);
  CHECK(o.schedule.lrf == 0.1);
  CHECK(o.schedule.momentum == 0.9);
  CHECK(o.weight_decay == 0.001);
  CHECK(o.schedule.warmup_epochs == 2.0);
  CHECK(o.schedule.warmup_bias_lr == 0.05);
  CHECK(o.loss.box == 0.06);
  CHECK(o.loss.obj_pw == 1.2);
  CHECK(o.loss.anchor_t == 3.5);
  CHECK(o.loss.fl_gamma == 1.5);
  CHECK(o.augment.scale == 0.9);
  CHECK(o.augment.mosaic == 0.8);
  CHECK(o.augment.flipud == 0.1);

  write_text(hyp, "mixup: 0.1\ncopy_paste: 0.3\n");
  models::load_hyp_yaml(hyp.string(), o);
  CHECK(o.augment.mixup == 0.1);
  CHECK(o.augment.copy_paste == 0.3);
  write_text(hyp, "copy_paste: 1.5\n");
  CHECK_THROWS_WITH_AS(models::load_hyp_yaml(hyp.string(), o),
                       doctest::Contains("copy_paste = 1.5 must be in [0, 1]"),
                       std::invalid_argument);
  write_text(hyp, "fl_gamma: -0.5\n");
  CHECK_THROWS_WITH_AS(models::load_hyp_yaml(hyp.string(), o),
                       doctest::Contains("fl_gamma = -0.5 must be >= 0"), std::invalid_argument);
  write_text(hyp, "lr_zero: 0.1\n");
  CHECK_THROWS_WITH_AS(models::load_hyp_yaml(hyp.string(), o), doctest::Contains("'lr_zero'"),
                       std::invalid_argument);
  write_text(hyp, "lr0: fast\n");
  CHECK_THROWS_WITH_AS(models::load_hyp_yaml(hyp.string(), o),
                       doctest::Contains("must be a number"), std::invalid_argument);
}

TEST_CASE("the saved configuration round-trips and leaves run-time fields alone") {
  models::TrainOptions o;
  o.data = "/d/data.yaml";
  o.cfg = "/m/yolov5n.yaml";
  o.run_dir = "/runs/exp4";
  o.epochs = 7, o.batch = 24, o.imgsz = 320, o.workers = 3, o.nbs = 32, o.patience = 5;
  o.seed = 123456789012345ull;
  o.validate = false;
  o.rect = o.multi_scale = true;
  o.optimizer = models::OptimizerKind::adamw;
  o.freeze = 10, o.save_period = 2, o.save_steps = 50, o.save_total_limit = 3;
  o.schedule.cosine = true;
  o.schedule.lr0 = 1.0 / 3;
  o.augment.hsv_h = 0.0123;
  o.loss.label_smoothing = 0.1;
  o.max_steps = 99;
  const std::string json = models::options_to_json(o);
  CHECK(json.find("max_steps") == std::string::npos);  // never part of the configuration

  models::TrainOptions back;
  back.max_steps = 5;
  back.project = "elsewhere";
  models::options_from_json(json, back);
  CHECK(back.data == o.data);
  CHECK(back.run_dir == o.run_dir);
  CHECK(back.epochs == 7);
  CHECK(back.batch == 24);
  CHECK(back.seed == o.seed);
  CHECK_FALSE(back.validate);
  CHECK(back.rect);
  CHECK(back.multi_scale);
  CHECK(back.optimizer == models::OptimizerKind::adamw);
  CHECK(back.freeze == 10);
  CHECK(back.save_steps == 50);
  CHECK(back.schedule.cosine);
  CHECK(back.schedule.lr0 == 1.0 / 3);  // exact
  CHECK(back.augment.hsv_h == 0.0123);
  CHECK(back.loss.label_smoothing == 0.1);
  CHECK(back.max_steps == 5);  // the caller's
  CHECK(back.project == "elsewhere");
  // A checkpoint written before --rect and --multi-scale existed trained without them.
  nlohmann::json older = nlohmann::json::parse(json);
  older.erase("rect"), older.erase("multi_scale");
  models::options_from_json(older.dump(), back);
  CHECK_FALSE(back.rect);
  CHECK_FALSE(back.multi_scale);
  CHECK_THROWS_WITH_AS(models::options_from_json(R"({"data": "x"})", back),
                       doctest::Contains("'cfg'"), std::invalid_argument);
  CHECK(models::parse_optimizer_name("Adam") == models::OptimizerKind::adam);
  CHECK_THROWS_WITH_AS(models::parse_optimizer_name("adam"), doctest::Contains("SGD, Adam, AdamW"),
                       std::invalid_argument);
}

TEST_CASE("a configuration saved before mixup and copy-paste existed reads them as 0") {
  models::TrainOptions o;
  o.augment.mixup = 0.1, o.augment.copy_paste = 0.2;
  models::TrainOptions back;
  models::options_from_json(models::options_to_json(o), back);
  CHECK(back.augment.mixup == 0.1);
  CHECK(back.augment.copy_paste == 0.2);
  // Checkpoints written before them (tests/fixtures/checkpoints) have neither key: they trained
  // with both at 0, the only value bareyolo accepted then.
  std::string old = models::options_to_json(o);
  const auto remove = [&](const std::string& entry) {
    REQUIRE(old.find(entry) != std::string::npos);
    old.erase(old.find(entry), entry.size());
  };
  remove(",\"mixup\":0.1");
  remove(",\"copy_paste\":0.2");
  models::options_from_json(old, back);
  CHECK(back.augment.mixup == 0);
  CHECK(back.augment.copy_paste == 0);
  // Any other missing hyperparameter is still an error.
  remove(",\"mosaic\":1.0");
  CHECK_THROWS_WITH_AS(models::options_from_json(old, back), doctest::Contains("no 'mosaic'"),
                       std::invalid_argument);
}

TEST_CASE("--freeze N marks exactly the entries of layers 0 .. N-1") {
  models::DetectionModel model(models::load_model_config(shipped_file("models/yolov5-tiny.yaml")));
  const std::vector<StateEntry> state = model.state();
  const std::vector<bool> none = models::frozen_entries(state, 0);
  CHECK(std::count(none.begin(), none.end(), true) == 0);
  const std::vector<bool> frozen = models::frozen_entries(state, 2);
  for (size_t i = 0; i < state.size(); ++i) {
    const bool in_layer_0_or_1 =
        state[i].name.rfind("model.0.", 0) == 0 || state[i].name.rfind("model.1.", 0) == 0;
    CHECK(frozen[i] == in_layer_0_or_1);
  }
  CHECK(std::count(frozen.begin(), frozen.end(), true) == 12);  // two Conv blocks x 6 entries
  // "model.1." must not catch model.10 .. model.19.
  for (size_t i = 0; i < state.size(); ++i)
    if (state[i].name.rfind("model.1", 0) == 0 && state[i].name.rfind("model.1.", 0) != 0)
      CHECK_FALSE(frozen[i]);
}

// With no --hyp every hyperparameter is hyp.scratch-low.yaml's, the file YOLOv5's train.py
// reads by default (../shared/spec 3.1; its iou_t is unused), and label smoothing is off.
TEST_CASE("the default hyperparameters are YOLOv5's hyp.scratch-low.yaml") {
  const std::vector<std::pair<std::string, double>> scratch_low = {
      {"lr0", 0.01},           {"lrf", 0.01},          {"momentum", 0.937},
      {"weight_decay", 5e-4},  {"warmup_epochs", 3.0}, {"warmup_momentum", 0.8},
      {"warmup_bias_lr", 0.1}, {"box", 0.05},          {"cls", 0.5},
      {"cls_pw", 1.0},         {"obj", 1.0},           {"obj_pw", 1.0},
      {"anchor_t", 4.0},       {"fl_gamma", 0.0},      {"label_smoothing", 0.0},
      {"hsv_h", 0.015},        {"hsv_s", 0.7},         {"hsv_v", 0.4},
      {"degrees", 0.0},        {"translate", 0.1},     {"scale", 0.5},
      {"shear", 0.0},          {"perspective", 0.0},   {"flipud", 0.0},
      {"fliplr", 0.5},         {"mosaic", 1.0},        {"mixup", 0.0},
      {"copy_paste", 0.0}};
  const std::vector<models::HypValue> defaults = models::hyp_values(models::TrainOptions{});
  CHECK(defaults.size() == scratch_low.size());
  for (const auto& [name, value] : scratch_low) {
    const std::string wanted = name;  // clang 14 captures no structured binding in a lambda
    CAPTURE(wanted);
    const auto found = std::find_if(defaults.begin(), defaults.end(),
                                    [&](const models::HypValue& v) { return v.name == wanted; });
    REQUIRE(found != defaults.end());
    CHECK(found->value == value);
  }
}

// The 3-hour bound on every wait of a running job (docs/ddp.md): the store's default and a
// training job's, which --timeout changes.
TEST_CASE("a job's store calls and collectives wait at most 3 hours unless --timeout says") {
  CHECK(models::TrainOptions{}.timeout_s == 3 * 60 * 60);
  CHECK(dist::kDefaultStoreTimeout == std::chrono::hours(3));
}

TEST_CASE("loader_workers: a given count wins, auto follows the device and the rank's cores") {
  CHECK(models::loader_workers(3, Device::cpu(), 64) == 3);
  // CPU ranks: the compute threads have the cores.
  CHECK(models::loader_workers(models::kAutoWorkers, Device::cpu(), 64) == 2);
  const Device gpu = Device::cuda(0);  // only the device's kind is read
  cpu_set_t saved, one_core;
  REQUIRE(::sched_getaffinity(0, sizeof saved, &saved) == 0);
  const int cores = CPU_COUNT(&saved);
  CHECK(models::loader_workers(models::kAutoWorkers, gpu, 64) ==
        std::max(1, std::min(cores - 1, 64)));
  CPU_ZERO(&one_core);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &saved)) {
      CPU_SET(cpu, &one_core);
      break;
    }
  REQUIRE(::sched_setaffinity(0, sizeof one_core, &one_core) == 0);
  CHECK(models::loader_workers(models::kAutoWorkers, gpu, 64) == 1);  // at least one
  REQUIRE(::sched_setaffinity(0, sizeof saved, &saved) == 0);
  // One image per rank: one thread builds it.
  CHECK(models::loader_workers(models::kAutoWorkers, gpu, 1) == 1);
}

TEST_CASE("plan_batch: each rank's share and YOLOv5's accumulation of the global batch") {
  const models::BatchPlan eight = models::plan_batch(16, 2, 64);
  CHECK(eight.global == 16);
  CHECK(eight.per_rank == 8);
  CHECK(eight.accumulate == 4);
  CHECK(models::plan_batch(24, 3, 64).accumulate == 3);   // round(2.67)
  CHECK(models::plan_batch(128, 4, 64).accumulate == 1);  // never below one
  CHECK(models::plan_batch(128, 4, 64).per_rank == 32);
  CHECK(models::plan_batch(40, 1, 100).accumulate == 2);  // round(2.5): half to even
  CHECK_THROWS_WITH_AS(models::plan_batch(10, 4, 64), doctest::Contains("use batch=8 or batch=12"),
                       std::invalid_argument);
}

TEST_CASE("--cuda-graph: auto records where it can, on refuses where it cannot, saying why") {
  models::TrainOptions options;
  const Device gpu = Device::cuda(0), cpu = Device::cpu();  // only the kind is read
  using enum models::StepCollectives;
  auto records = [&](models::CudaGraphMode mode, const Device& device, bool supported,
                     models::StepCollectives collectives) {
    options.cuda_graph = mode;
    return models::records_cuda_graphs(options, device, supported, collectives);
  };
  using enum models::CudaGraphMode;
  CHECK(records(automatic, gpu, true, none));
  CHECK(records(on, gpu, true, none));
  CHECK(!records(off, gpu, true, none));
  CHECK(!records(automatic, cpu, false, none));
  CHECK(!records(automatic, gpu, true, unrecordable));
  CHECK(!records(automatic, gpu, true, recordable));  // NCCL's: on request only
  CHECK(records(on, gpu, true, recordable));
  // ... until the gate opens (gated_defaults.h), and then only NCCL's.
  const models::GatedDefaults opened{.cuda_graph_with_nccl = true};
  options.cuda_graph = automatic;
  CHECK(models::records_cuda_graphs(options, gpu, true, recordable, opened));
  CHECK(!models::records_cuda_graphs(options, gpu, true, unrecordable, opened));
  options.rect = true;
  CHECK(!records(automatic, gpu, true, none));
  options.rect = false;
  options.multi_scale = true;
  CHECK(!records(automatic, gpu, true, none));
  options.multi_scale = false;
  auto refusal = [&](const Device& device, bool supported, models::StepCollectives collectives) {
    try {
      records(on, device, supported, collectives);
    } catch (const std::invalid_argument& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  CHECK(refusal(cpu, false, none).find("trains on cpu, which has no CUDA graphs") !=
        std::string::npos);
  CHECK(refusal(gpu, true, unrecordable).find("talks to other ranks over TCP or shared memory") !=
        std::string::npos);
  CHECK(refusal(gpu, true, recordable) == "accepted");
  options.multi_scale = true;
  CHECK(refusal(gpu, true, none).find("--multi-scale gives batches of many shapes") !=
        std::string::npos);
}

TEST_CASE("--amp: as asked, else bf16 on GPUs with bf16 tensor cores once the gate opens") {
  const models::DeviceAbilities cpu{}, ampere{.gpu = true, .bf16_tensor_cores = true},
      turing{.gpu = true, .bf16_tensor_cores = false};
  const models::GatedDefaults shut{}, opened{.amp_on_bf16_gpus = true};
  models::TrainOptions options;
  CHECK_THROWS_AS(models::mixed_precision(options), std::logic_error);  // unresolved
  auto amp = [&](const models::DeviceAbilities& device, const models::GatedDefaults& gates) {
    return models::mixed_precision(models::resolved_for(options, device, gates));
  };
  for (const auto* device : {&cpu, &ampere, &turing}) CHECK(!amp(*device, shut));
  CHECK(!amp(cpu, opened));
  CHECK(amp(ampere, opened));
  CHECK(!amp(turing, opened));
  CHECK(!amp(ampere, models::kGatedDefaults));  // this build: float32 until a GPU run
  for (bool asked : {false, true}) {
    options.amp = asked;  // --amp, --no-amp: whatever the device and the gate
    for (const auto* device : {&cpu, &ampere, &turing})
      for (const auto* gates : {&shut, &opened}) CHECK(amp(*device, *gates) == asked);
  }
  // The resolved options say it, so a checkpoint and a resumed run keep it.
  options.amp.reset();
  CHECK(models::resolved_for(options, ampere, opened).amp == std::optional<bool>(true));
  CHECK(models::numerics_flags(options).front().value == "auto");
}

TEST_CASE("a Solver asked to record its steps on the CPU refuses, naming the device") {
  models::DetectionModel model(models::load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                               {.nc = 2, .seed = 5});
  CHECK_THROWS_WITH_AS(models::Solver(model, {.loss = {models::scale_loss_gains({}, 3, 2, 64), 2},
                                              .cuda_graph = models::CudaGraphMode::on}),
                       doctest::Contains("this run trains on cpu, which has none"),
                       std::invalid_argument);
}
