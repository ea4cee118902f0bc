// tools/train_command.cpp — see train_command.h.
#include "tools/train_command.h"

#include <cstdio>
#include <filesystem>
#include <string>

#include "data/shapes.h"
#include "models/trainer.h"

namespace bareyolo {

namespace {

namespace fs = std::filesystem;

struct TrainCommandOptions {
  models::TrainOptions train;
  std::string project = "runs/train", name = "exp";
  bool exist_ok = false, no_val = false;
} options;

// <project>/<name>, or the first free <project>/<name>N (N = 2, 3, ...), as YOLOv5 names runs.
std::string run_directory() {
  const fs::path base = fs::path(options.project) / options.name;
  if (options.exist_ok || !fs::exists(base)) return base.string();
  for (int n = 2;; ++n) {
    const fs::path candidate = fs::path(options.project) / (options.name + std::to_string(n));
    if (!fs::exists(candidate)) return candidate.string();
  }
}

// The built-in shapes dataset, generated on first use.
std::string default_dataset() {
  const fs::path yaml = fs::path("datasets") / "shapes" / "data.yaml";
  if (fs::exists(yaml)) return yaml.string();
  std::printf("generating the built-in shapes dataset in datasets/shapes ...\n");
  return data::make_shapes_dataset({.out = (fs::path("datasets") / "shapes").string()});
}

int train() {
  models::TrainOptions& t = options.train;
  if (t.data.empty()) t.data = default_dataset();
  t.validate = !options.no_val;
  t.run_dir = run_directory();
  const models::TrainSummary summary =
      models::train(t, [](const std::string& line) { std::printf("%s\n", line.c_str()); std::fflush(stdout); });
  std::printf("done: %d epochs, %lld optimizer steps in %.0f s; best mAP50 %.3f, mAP50-95 %.3f; "
              "weights in %s/weights\n",
              summary.epochs_run, static_cast<long long>(summary.optimizer_steps),
              summary.seconds, summary.best_map50, summary.best_map50_95, t.run_dir.c_str());
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app) {
  models::TrainOptions& t = options.train;
  t.cfg = std::string(BAREYOLO_SOURCE_DIR) + "/models/yolov5n.yaml";
  CLI::App* cmd = app.add_subcommand("train", "Train a detector (YOLOv5's recipe, one process)");
  cmd->add_option("--data", t.data, "Dataset yaml (default: the built-in shapes data)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--cfg", t.cfg, "Model yaml")->check(CLI::ExistingFile)->capture_default_str();
  cmd->add_option("--weights", t.weights, "Initial weights (.safetensors); default: from scratch")
      ->check(CLI::ExistingFile);
  cmd->add_option("--epochs", t.epochs, "Epochs")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--batch", t.batch, "Batch size")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--imgsz", t.imgsz, "Image size (pixels)")->check(CLI::Range(32, 8192))
      ->capture_default_str();
  cmd->add_option("--workers", t.workers, "Data loader threads")->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--project", options.project, "Folder of runs")->capture_default_str();
  cmd->add_option("--name", options.name, "Run name")->capture_default_str();
  cmd->add_flag("--exist-ok", options.exist_ok, "Reuse <project>/<name> instead of numbering");
  cmd->add_option("--seed", t.seed, "Seed of initialisation, shuffling and augmentation");
  cmd->add_option("--nbs", t.nbs, "Nominal batch size (accumulation target)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--patience", t.patience, "Stop after this many epochs without improvement")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--max-steps", t.max_steps, "Stop after this many optimizer steps");
  cmd->add_flag("--no-val", options.no_val, "Validate only after the last epoch");
  cmd->add_flag("--cos-lr", t.schedule.cosine, "Cosine learning-rate schedule");
}

std::optional<int> run_train_command(const CLI::App& app) {
  if (app.got_subcommand("train")) return train();
  return std::nullopt;
}

}  // namespace bareyolo
