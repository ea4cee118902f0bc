// tests/dist/train.cpp — `bareyolo train`'s launch end to end, in-process through
// models::run_training: the spawn path forks real ranks from this test.
//
// World-size invariance with the whole recipe: 1 rank x batch 8 and 2 ranks x 4 (SyncBN,
// default augmentation incl. mosaic, nbs 64 so that once warmup has raised `accumulate` past
// 1 gradients accumulate over batches and the reducer's no_sync is crossed) end three epochs
// with the same raw weights, within float tolerance. Most images carry no labels, so most
// micro-batches differ in their label counts and many have none (tests/dist/world_invariance.cpp
// pins down the exact case of one rank with no labels at all).
//
// Elastic restarts: rank 0 (the store's host) SIGKILLs itself after optimizer step 7; with
// --max-restarts 1 the launcher restarts the job from the step-5 checkpoint and the run ends
// with the uninterrupted run's final weights, byte for byte; with 0 the failure ends it.
//
// Sharded validation inside training: 2 ranks without SyncBN (so their BatchNorm statistics
// differ) report the metrics and val losses of one process validating rank 0's final weights;
// so do 2 ranks whose poor anchors rank 0's AutoAnchor replaced.
//
// Early stopping: every rank stops after the epoch that rank 0's validation decides.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include "data/shapes.h"
#include "engine/safetensors.h"
#include "engine/shipped_files.h"
#include "engine/trace_analysis.h"
#include "models/train/callbacks.h"
#include "models/train/early_stopping.h"
#include "models/train/epoch_validation.h"
#include "models/train/launch.h"
#include "models/yolo/model_config.h"
#include "models/yolo/weights.h"
#include "models/yolo/yolo_model.h"
#include "tests/support/data_fixtures.h"
#include "tests/support/kept_checkpoint.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using bareyolo::testing::keep_last_checkpoint;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("bareyolo-dist-train-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

// The built-in shapes dataset in 64-px images under `root`: its yaml.
std::string shapes(const fs::path& root, int n_train, int n_val, int classes = 2) {
  return data::make_shapes_dataset({.out = (root / "shapes").string(),
                                    .n_train = n_train,
                                    .n_val = n_val,
                                    .imgsz = 64,
                                    .classes = classes});
}

// 32 training images of which only 8 keep their labels (the rest become background).
std::string sparse_shapes(const fs::path& root) {
  const std::string yaml = shapes(root, 32, 4);
  int kept = 0;
  for (const auto& entry : fs::directory_iterator(root / "shapes" / "labels" / "train"))
    if (kept++ >= 8) fs::remove(entry.path());
  return yaml;
}

models::TrainOptions tiny_run(const std::string& data, const fs::path& project, const char* name,
                              int ranks) {
  models::TrainOptions options;
  options.data = data;
  options.cfg = shipped_file("models/yolov5-tiny.yaml");
  options.epochs = 3;
  options.batch = 8;
  options.nbs = 64;
  options.imgsz = 64;
  options.workers = 1;
  options.validate = false;
  options.show_progress = false;
  options.device = "cpu";
  options.nproc_per_node = ranks;
  options.project = project.string();
  options.name = name;
  return options;
}

// Norm-wise relative differences between the raw (not EMA) weights of two checkpoints: the
// largest of any tensor, and of all of them as one vector.
struct WeightsDifference {
  double worst = 0, overall = 0;
  std::string where;
  int compared = 0;
};
WeightsDifference raw_weights_difference(const std::string& path_a, const std::string& path_b) {
  const SafetensorsFile a = SafetensorsFile::load(path_a), b = SafetensorsFile::load(path_b);
  WeightsDifference result;
  double all_diff = 0, all_norm = 0;
  for (const TensorRecord& record : a.records()) {
    if (record.name.rfind("train.model.", 0) != 0 || record.dtype != "F32") continue;
    const std::vector<float> x = a.values<float>(record.name), y = b.values<float>(record.name);
    REQUIRE(x.size() == y.size());
    double diff = 0, norm = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      diff += (double(x[k]) - y[k]) * (double(x[k]) - y[k]);
      norm += double(x[k]) * x[k];
    }
    const double error = std::sqrt(diff / std::max(norm, 1e-30));
    if (error > result.worst) result.worst = error, result.where = record.name;
    ++result.compared;
    all_diff += diff, all_norm += norm;
  }
  result.overall = std::sqrt(all_diff / std::max(all_norm, 1e-30));
  return result;
}

// A run's one validation as results.jsonl reports it, and that of its final weights (rank 0's
// EMA) by one process on the whole val split, in the batches the trainer used (per-rank batch
// x 2).
struct Validations {
  models::EpochMetrics reported;
  models::ValidationNumbers alone;
  int64_t images = 0;
};
Validations validate_alone(const models::TrainOptions& options, const models::TrainSummary& run) {
  std::ifstream jsonl(run.run_dir + "/results.jsonl");
  std::string line;
  REQUIRE(std::getline(jsonl, line));
  const std::string final_weights = run.run_dir + "/weights/final.safetensors";
  const SafetensorsFile file = SafetensorsFile::load(final_weights);
  models::DetectionModel model(models::weights_model_config(file, final_weights, ""), {.nc = 2});
  models::load_state(file, model.state(), final_weights);
  const data::OpenedSplit val = data::open_split(data::read_dataset_yaml(options.data), "val");
  const models::LossOptions loss{
      models::scale_loss_gains(options.loss, model.num_levels(), 2, options.imgsz), 2};
  const int batch = options.batch / options.nproc_per_node * 2;
  const auto [result, alone] = models::validate_with_loss(
      model, val.dataset, {.batch = batch, .imgsz = options.imgsz}, loss, nullptr);
  return {models::parse_epoch_metrics_json(line), alone, result.images};
}

}  // namespace

TEST_CASE(
    "train: 2 CPU ranks x 4 images end like 1 rank x 8 (SyncBN, augmentation, accumulation)") {
  TempDir dir;
  const std::string data = sparse_shapes(dir.path);
  auto quiet = [](const std::string&) {};
  // The 2-rank run first: it forks, which a process that trained on a GPU could not do. Each
  // run's last checkpoint is kept as written, before the end strips it.
  models::TrainOptions two_ranks = tiny_run(data, dir.path, "two", 2),
                       one_rank = tiny_run(data, dir.path, "one", 1);
  two_ranks.callbacks = {keep_last_checkpoint(dir.path / "two-last.safetensors")};
  one_rank.callbacks = {keep_last_checkpoint(dir.path / "one-last.safetensors")};
  const models::TrainSummary two = models::run_training(two_ranks, quiet);
  const models::TrainSummary one = models::run_training(one_rank, quiet);
  // 12 batches; warmup steps after each of the first 8, then every second one.
  CHECK(one.optimizer_steps == 10);
  CHECK(two.optimizer_steps == 10);
  // Norm-wise per tensor: float rounding differs between a batch of 8 and two of 4.
  const WeightsDifference difference = raw_weights_difference(
      (dir.path / "one-last.safetensors").string(), (dir.path / "two-last.safetensors").string());
  MESSAGE("largest relative difference " << difference.worst << " at " << difference.where
                                         << "; over all weights " << difference.overall);
  CHECK(difference.compared > 50);
  CHECK(difference.worst < 1e-3);  // measured 1.3e-4; per-rank BatchNorm instead of SyncBN: 5.0
}

// AutoAnchor in a 2-rank run: rank 0 searches, every rank takes its anchors before anything
// copies them (the EMA). Anchors of 300 pixels on 64-pixel images match no label: a rank that
// validated its shard with them (or with an EMA of them) would report other losses than one
// process validating rank 0's final weights.
TEST_CASE("train: AutoAnchor's anchors reach every rank's model and EMA") {
  TempDir dir;
  std::ofstream(dir.path / "poor.yaml") << models::yaml_text_with_anchors(
      models::load_model_config(shipped_file("models/yolov5-tiny.yaml")),
      {{300, 300, 310, 310, 320, 320},
       {330, 330, 340, 340, 350, 350},
       {360, 360, 370, 370, 380, 380}});
  const std::string data = shapes(dir.path, 16, 24);
  models::TrainOptions options = tiny_run(data, dir.path, "autoanchor", 2);
  options.cfg = (dir.path / "poor.yaml").string();
  options.epochs = 1;
  const models::TrainSummary summary = models::run_training(options, [](const std::string&) {});
  const std::string final_weights = summary.run_dir + "/weights/final.safetensors";
  // The anchors it trained with (the yaml the weights carry): the labels' sizes, not 300 px.
  for (const std::vector<double>& level :
       models::weights_model_config(SafetensorsFile::load(final_weights), final_weights, "")
           .anchors)
    CHECK(*std::max_element(level.begin(), level.end()) < 64);
  const auto [reported, alone, images] = validate_alone(options, summary);
  CHECK(images == 24);
  CHECK(reported.val_box == doctest::Approx(alone.box).epsilon(1e-12));
  CHECK(reported.val_obj == doctest::Approx(alone.obj).epsilon(1e-12));
}

// --rect --multi-scale: each global batch letterboxed into the canvas of its images and resized
// to a size drawn per step, both the same on every rank, so 2 ranks x 4 images still end like
// 1 rank x 8 (16 wide images of several aspect ratios at 128 px: canvases 128 x 96 and 128 x
// 128, resized to 192 x 160, 192 x 192, 96 x 96, 96 x 96; 2 epochs). Compared over all weights
// at once: the last batch (letterboxed images shrunk to 96 px) is one whose gradients float
// computes poorly — measured against the same step in double, the one-rank gradients are off
// by 1.8e-5 and the two-rank ones by 3.8e-5 over all weights — and its bias-lr 0.1 update moves
// a few small BatchNorm biases by a tenth of their size. Measured: 3.8e-5 over all weights;
// multi-scale sizes that differ between the two runs: 7.1e-3.
TEST_CASE("train --rect --multi-scale: 2 CPU ranks x 4 images end like 1 rank x 8") {
  TempDir dir;
  const std::string data = bareyolo::testing::make_box_dataset(dir.path / "boxes", 16, 2);
  auto run = [&](const char* name, int ranks) {
    models::TrainOptions options = tiny_run(data, dir.path, name, ranks);
    options.epochs = 2, options.imgsz = 128;
    options.rect = options.multi_scale = true;
    // The run's last checkpoint as written, before the end strips it.
    options.callbacks = {
        keep_last_checkpoint(dir.path / (std::string(name) + "-last.safetensors"))};
    return models::run_training(options, [](const std::string&) {});
  };
  const models::TrainSummary two = run("two", 2);  // first: it forks
  const models::TrainSummary one = run("one", 1);
  CHECK(one.optimizer_steps == 4);  // warmup: a step after each of the 4 batches
  CHECK(two.optimizer_steps == 4);
  const WeightsDifference difference = raw_weights_difference(
      (dir.path / "one-last.safetensors").string(), (dir.path / "two-last.safetensors").string());
  MESSAGE("largest relative difference " << difference.worst << " at " << difference.where
                                         << "; over all weights " << difference.overall);
  CHECK(difference.compared > 50);
  CHECK(difference.overall < 5e-4);
}

// Mixed precision's plumbing in a real run: bf16 activations and bf16 gradient buckets over
// the TCP ring, against the same run in fp32 on one rank. The checkpoint keeps
// fp32 masters, which bf16 does not hold. Compared over all weights at once: after 10 steps a
// BatchNorm bias is only its summed gradients (it starts at 0, warmup moves it at lr 0.1), and
// such a sum of bf16 gradients that nearly cancel differs from the fp32 one by most of its
// small size (measured: 0.31% over all weights; BN biases of norm ~0.01 up to 175%).
TEST_CASE("train --amp --grad-dtype bf16: 2 CPU ranks stay near fp32, checkpoints keep fp32") {
  TempDir dir;
  const std::string data = sparse_shapes(dir.path);
  auto quiet = [](const std::string&) {};
  models::TrainOptions amp = tiny_run(data, dir.path, "amp", 2);
  amp.amp = true;
  amp.bf16_grad_buckets = true;
  const std::string last = (dir.path / "amp-last.safetensors").string(),
                    fp32_last = (dir.path / "fp32-last.safetensors").string();
  amp.callbacks = {keep_last_checkpoint(last)};  // as written, before the end strips it
  models::TrainOptions fp32 = tiny_run(data, dir.path, "fp32", 1);
  fp32.callbacks = {keep_last_checkpoint(fp32_last)};
  const models::TrainSummary two = models::run_training(amp, quiet);
  models::run_training(fp32, quiet);
  CHECK(two.optimizer_steps == 10);

  const SafetensorsFile checkpoint = SafetensorsFile::load(last);
  int64_t not_bf16 = 0;
  for (const TensorRecord& record : checkpoint.records()) {
    CHECK(record.dtype != "BF16");
    if (record.name.rfind("train.model.", 0) == 0 && record.dtype == "F32")
      for (float v : checkpoint.values<float>(record.name)) not_bf16 += round_to_bf16(v) != v;
  }
  CHECK(not_bf16 > 1000);
  const WeightsDifference difference = raw_weights_difference(fp32_last, last);
  MESSAGE("relative difference to fp32: " << difference.overall << " over all weights, "
                                          << difference.worst << " at most (" << difference.where
                                          << ")");
  CHECK(difference.compared > 50);
  CHECK(difference.overall > 3e-4);  // the rounding was on: measured 3.1e-3; fp32 on 2 ranks 2.3e-7
  CHECK(difference.overall < 0.02);
}

TEST_CASE("train: 2 CPU ranks without SyncBN validate in shards like one process on rank 0's EMA") {
  TempDir dir;
  const std::string data = shapes(dir.path, 16, 24);
  models::TrainOptions options = tiny_run(data, dir.path, "sharded", 2);
  options.epochs = 1;
  options.validate = true;
  options.sync_bn = false;
  const models::TrainSummary summary = models::run_training(options, [](const std::string&) {});
  // 2 x 4 images per rank: 3 batches, shares of 1 and 2.
  const auto [reported, alone, images] = validate_alone(options, summary);
  CHECK(images == 24);
  CHECK(reported.map50 == alone.map50);
  CHECK(reported.map50_95 == alone.map50_95);
  CHECK(reported.precision == alone.precision);
  CHECK(reported.recall == alone.recall);
  // The losses are sums over batches, added in another order: equal to rounding. Rank 1's own
  // BatchNorm statistics (no broadcast_buffers) move them by far more.
  CHECK(reported.val_box == doctest::Approx(alone.box).epsilon(1e-12));
  CHECK(reported.val_obj == doctest::Approx(alone.obj).epsilon(1e-12));
  CHECK(reported.val_cls == doctest::Approx(alone.cls).epsilon(1e-12));
}

// Early stopping in a 2-rank run: every rank takes rank 0's validation numbers
// (ValidationNumbers::from_rank0), so every rank stops after the epoch rank 0's fitness gives.
// Four val images make one val batch, rank 0's share: rank 1's own share is empty, so its own
// numbers (fitness 0 every epoch) would stop it after patience + 1 epochs whatever rank 0 saw,
// and rank 0, still improving, would find it gone at its next collective. Measured (2-vCPU
// Xeon): rank 0's fitness rises until epoch 4 and the run stops after 8 of 10 epochs; with the
// broadcast taken out, rank 1 left after epoch 4 and rank 0 failed ("lost rank 1").
TEST_CASE("train --patience: 2 CPU ranks stop after the epoch rank 0's fitness gives") {
  TempDir dir;
  const std::string data = shapes(dir.path, 64, 4, 1);
  models::TrainOptions options = tiny_run(data, dir.path, "patience", 2);
  options.epochs = 10;
  options.validate = true;
  options.patience = 3;
  const models::TrainSummary summary = models::run_training(options, [](const std::string&) {});
  // Where the rule (EarlyStopping, tested on its own in tests/unit/early_stopping.cpp) stops on
  // the fitness results.jsonl recorded.
  std::ifstream jsonl(summary.run_dir + "/results.jsonl");
  std::vector<double> fitness;
  double best_map50 = 0;
  for (std::string line; std::getline(jsonl, line);) {
    const models::EpochMetrics m = models::parse_epoch_metrics_json(line);
    CHECK(m.fitness == doctest::Approx(0.1 * m.map50 + 0.9 * m.map50_95).epsilon(1e-12));
    best_map50 = std::max(best_map50, m.map50);
    fitness.push_back(m.fitness);
  }
  REQUIRE(best_map50 > 0);  // so that YOLOv5's weights 0.1 and 0.9 were put to the test
  const models::EarlyStopping stopping{options.patience};
  models::TrainingProgress progress;
  int stops_after = options.epochs;
  for (int epoch = 0; epoch < int(fitness.size()) && stops_after == options.epochs; ++epoch)
    if (stopping.update(epoch, fitness[size_t(epoch)], progress)) stops_after = epoch + 1;
  std::string listed;
  for (double value : fitness) listed += " " + std::to_string(value);
  MESSAGE("fitness by epoch:" << listed);
  CHECK(summary.epochs_run == stops_after);
  CHECK(int(fitness.size()) == stops_after);
}

namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A callback that kills its process (rank 0, the only one with callbacks) once after `step`,
// the first time only (`marker` remembers across the restart), and not before the checkpoint
// file `written` is reported (on_model_save): checkpoints are written in the background
// (models/train/checkpointer.h), so a kill before then could find only the one before it.
// Every file asked for before an epoch's end is reported by then, so the kill comes in the
// epoch of `step` either way.
models::TrainCallbacks kill_once_after(int64_t step, const std::string& written,
                                       const fs::path& marker) {
  struct Seen {
    int64_t optimizer_steps = 0;
    bool written = false;
  };
  auto seen = std::make_shared<Seen>();
  auto kill_when_due = [seen, step, marker] {
    if (seen->optimizer_steps < step || !seen->written || fs::exists(marker)) return;
    std::ofstream(marker) << "killed";
    std::raise(SIGKILL);
  };
  models::TrainCallbacks callbacks;
  callbacks.on_train_batch_end = [seen, kill_when_due](const models::BatchEndInfo& info) {
    seen->optimizer_steps = info.optimizer_steps;
    kill_when_due();
  };
  callbacks.on_model_save = [seen, written, kill_when_due](const std::string& path) {
    if (fs::path(path).filename() == written) seen->written = true;
    kill_when_due();
  };
  return callbacks;
}

}  // namespace

TEST_CASE("train: --max-restarts 1 outlives a SIGKILLed rank 0, to the uninterrupted weights") {
  TempDir dir;
  const std::string data = sparse_shapes(dir.path);
  std::vector<std::string> lines;
  auto collect = [&lines](const std::string& line) { lines.push_back(line); };
  const models::TrainSummary whole =
      models::run_training(tiny_run(data, dir.path, "whole", 2), collect);

  models::TrainOptions options = tiny_run(data, dir.path, "restarted", 2);
  options.save_steps = 5;
  options.max_restarts = 1;
  options.callbacks = {kill_once_after(7, "step5.safetensors", dir.path / "killed-restarted")};
  const models::TrainSummary restarted = models::run_training(options, collect);
  CHECK(restarted.finished);
  const std::string expected =
      "restart 1 of 1 after rank 0 was killed by signal 9 (SIGKILL): "
      "continuing from " +
      restarted.run_dir + "/weights/last.safetensors (epoch 1, optimizer step 5)";
  CHECK_MESSAGE(std::find(lines.begin(), lines.end(), expected) != lines.end(),
                "no line '" << expected << "' in the log");
  const std::string a = file_bytes(whole.run_dir + "/weights/final.safetensors");
  CHECK(!a.empty());
  CHECK(a == file_bytes(restarted.run_dir + "/weights/final.safetensors"));

  options.name = "stopped";
  options.max_restarts = 0;
  options.callbacks = {kill_once_after(7, "step5.safetensors", dir.path / "killed-stopped")};
  CHECK_THROWS_WITH_AS(models::run_training(options, collect),
                       doctest::Contains("training stopped: a worker failed"), std::runtime_error);
}

TEST_CASE("train --trace: 2 ranks in one Chrome trace, buckets leaving during backward") {
  TempDir dir;
  models::TrainOptions options = tiny_run(sparse_shapes(dir.path), dir.path, "traced", 2);
  options.cfg = shipped_file("models/yolov5n.yaml");
  options.epochs = 1;
  options.max_steps = 3;
  options.trace = (dir.path / "trace.json").string();
  options.trace_begin = 1, options.trace_end = 3;
  // The TCP ring, whose comm thread moves a bucket while backward goes on; the shm communicator
  // sums each bucket on the training thread when it is issued, so none overlaps by design.
  options.backend = "tcp";
  models::run_training(options, [](const std::string&) {});
  const std::vector<std::vector<trace::Event>> ranks =
      trace::events_from_chrome_json(file_bytes(options.trace));
  REQUIRE(ranks.size() == 2);
  std::pair<int64_t, int64_t> batchnorms_and_c3s;  // counted from the state names
  for (const StateEntry& entry :
       models::DetectionModel(models::load_model_config(options.cfg)).state()) {
    const bool bn_weight = entry.name.ends_with(".bn.weight");
    batchnorms_and_c3s.first += bn_weight;
    batchnorms_and_c3s.second += bn_weight && entry.name.ends_with(".cv3.bn.weight");
  }
  CHECK(batchnorms_and_c3s == std::pair<int64_t, int64_t>(57, 8));
  int ranks_overlapping = 0, ranks_hiding = 0;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    CAPTURE(rank);
    const std::vector<trace::Event>& events = ranks[rank];
    const trace::StepAnatomy anatomy = trace::step_anatomy(events);
    CHECK(anatomy.steps == 2);  // optimizer steps 1 and 2
    // yolov5n's 7.1 MB of gradients in buckets sized from the model, SyncBN in every BN.
    CHECK(anatomy.kinds.at("allreduce bucket").count == 2 * int64_t(anatomy.buckets.size()));
    CHECK(anatomy.buckets.size() >= 6);
    // Two meetings per BatchNorm and step (forward's moments, backward's sums), less one of
    // each per C3, whose cv1 and cv2 share theirs: yolov5n's 57 and 8 give 98 a step.
    CHECK(anatomy.kinds.at("syncbn").count ==
          anatomy.steps * 2 * (batchnorms_and_c3s.first - batchnorms_and_c3s.second));
    CHECK(anatomy.buckets.front().before_backward_end_ms > 0);  // the first left before the end
    // A bucket range overlaps a backward range: communication during backward.
    int overlapping = 0;
    for (const trace::Event& bucket : events)
      if (bucket.name.rfind("allreduce bucket ", 0) == 0)
        for (const trace::Event& backward : events)
          if (backward.name.rfind("backward model.", 0) == 0 && bucket.begin_us < backward.end_us &&
              backward.begin_us < bucket.end_us) {
            ++overlapping;
            break;
          }
    ranks_overlapping += overlapping > 0;
    ranks_hiding += trace::step_shares(events).hidden_communication > 0;
  }
  // On some rank, at least. In one CI run (two tests at once on two cores) rank 1 had no
  // bucket range over a backward range although its first bucket left before its backward
  // ended: a comm thread woken by the launch can take the shared core and finish the bucket
  // before the training thread starts the next backward range.
  CHECK(ranks_overlapping > 0);
  CHECK(ranks_hiding > 0);
  // The ranks' meetings pair up one to one; each costs some latency.
  const std::optional<trace::MeetingCosts> meetings = trace::meeting_costs(ranks);
  REQUIRE(meetings.has_value());
  CHECK(meetings->meetings == trace::step_anatomy(ranks[0]).kinds.at("syncbn").count);
  CHECK(meetings->latency_ms > 0);
  CHECK(meetings->wait_ms >= 0);
}
