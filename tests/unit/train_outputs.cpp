// tests/unit/train_outputs.cpp — what a run shows stays the same: the log lines, results.csv,
// results.jsonl, report.html and the order in which the hooks fire, for a short run and for a
// run stopped by --max-steps and resumed, against tests/fixtures/outputs/ (written by the
// trainer before it was split into a loop and its callbacks). Users' scripts read these.
//
// Measured numbers differ between machines (the GEMM's vector width changes its order of
// additions) and times between runs, so every decimal number becomes "#" — and every number
// of the validation table's rows and of report.html, where a value may be exactly 0 or 1 —
// the temporary directory "<root>" and the model yaml "<cfg>"; integers elsewhere, words,
// columns, keys and the order of lines must match. With
// BAREYOLO_WRITE_OUTPUT_FIXTURES=1 the test writes the fixtures instead, and fails so that a
// rewrite is never mistaken for a pass.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "data/shapes.h"
#include "engine/shipped_files.h"
#include "models/train/callbacks.h"
#include "models/train/trainer.h"
#include "tests/support/testing.h"

using namespace bareyolo;
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text with the temporary root as "<root>", the model yaml as "<cfg>" and every decimal
// number as "#" (YOLOv5's column names mAP_0.5 and mAP_0.5:0.95 kept); with all_numbers, and
// on the lines of the validation table (they start with spaces), integers too: a class's
// precision may be exactly 0 on one machine and not on another.
void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at; (at = text.find(from)) != std::string::npos;) text.replace(at, from.size(), to);
}

std::string normalised(std::string text, const std::string& root, bool all_numbers = false) {
  replace_all(text, root, "<root>");
  replace_all(text, shipped_file("models/yolov5-tiny.yaml"), "<cfg>");
  const std::pair<std::string, std::string> kept[] = {
      {"mAP_0.5:0.95", "\x01"}, {"mAP_0.5", "\x02"}, {"mAP50-95", "\x03"}};
  for (const auto& [name, placeholder] : kept) replace_all(text, name, placeholder);
  static const std::regex decimal(R"((^|[^\w.])-?\d+(?:\.\d+(?:[eE][-+]?\d+)?|[eE][-+]?\d+)\b)");
  static const std::regex integer(R"(\b\d+\b)");
  std::istringstream lines(text);
  std::string out;
  for (std::string line; std::getline(lines, line);) {
    line = std::regex_replace(line, decimal, "$1#");
    if (all_numbers || line.rfind("  ", 0) == 0) line = std::regex_replace(line, integer, "#");
    out += line + "\n";
  }
  for (const auto& [name, placeholder] : kept) replace_all(out, placeholder, name);
  return out;
}

// What one scenario shows: the log, the hooks in order, and the run directory's text files.
struct Shown {
  std::string log, hooks;
};

models::TrainOptions short_run(const fs::path& root, Shown& shown) {
  models::TrainOptions options;
  options.data = (root / "shapes" / "data.yaml").string();
  options.cfg = shipped_file("models/yolov5-tiny.yaml");
  options.epochs = 2;
  options.batch = 4;
  options.imgsz = 64;
  options.workers = 1;
  options.save_period = 1;
  options.show_progress = false;
  options.plots = false;  // pictures hold measured pixels; train_pictures.cpp checks them
  options.run_dir = (root / "run").string();
  models::TrainCallbacks record;
  record.on_train_start = [&](const models::TrainStartInfo& i) {
    shown.hooks += "train_start " + std::to_string(i.start_epoch) + "/" + std::to_string(i.epochs) +
                   " history " + std::to_string(i.history.size()) + "\n";
  };
  record.on_epoch_end = [&](int e) { shown.hooks += "epoch_end " + std::to_string(e) + "\n"; };
  record.on_fit_epoch_end = [&](const models::EpochMetrics& m) {
    shown.hooks += "fit_epoch_end " + std::to_string(m.epoch) + "\n";
  };
  record.on_model_save = [&](const std::string& p) { shown.hooks += "model_save " + p + "\n"; };
  record.on_train_end = [&](const models::TrainEndInfo& i) {
    shown.hooks += "train_end " + std::to_string(i.epochs_run) + " finished " +
                   std::to_string(i.finished) + "\n";
  };
  options.callbacks = {record};
  return options;
}

bool writing_fixtures() { return std::getenv("BAREYOLO_WRITE_OUTPUT_FIXTURES") != nullptr; }

// What may differ between builds as well as machines, taken out of both sides of a
// comparison: the padding before a masked number (a right-aligned 0.0021 and 0.00209 leave
// different spaces before their "#"), and which epochs save best.safetensors (whether one
// beats the last can turn on the last bits of the build's float arithmetic: Release and the
// sanitizers' RelWithDebInfo differ there; the test checks that the first epoch saves it),
// and so which row of report.html's epochs is marked best.
bool saves_best(const std::string& line) {
  return line.rfind("model_save ", 0) == 0 && line.ends_with("/best.safetensors");
}

std::string comparable(const std::string& text) {
  static const std::regex padded_number(R"( +#)");
  static const std::regex best_row(R"(<tr class="best">)");  // which epoch: as best.safetensors
  std::istringstream lines(
      std::regex_replace(std::regex_replace(text, padded_number, " #"), best_row, "<tr>"));
  std::string out;
  for (std::string line; std::getline(lines, line);)
    if (!saves_best(line)) out += line + "\n";
  return out;
}

void check_or_write(const std::string& name, const std::string& text) {
  const fs::path fixture =
      fs::path(shipped_file("tests/fixtures/outputs/README.md")).parent_path() / name;
  if (writing_fixtures()) {
    std::ofstream(fixture) << text;
    return;
  }
  CHECK_MESSAGE(comparable(text) == comparable(read_text(fixture)), name << " differs from "
                                                                         << fixture << ":\n"
                                                                         << text);
}

}  // namespace

TEST_CASE("train outputs: log, results files, report and hooks are as before") {
  const fs::path root =
      fs::temp_directory_path() / ("bareyolo-outputs-" + std::to_string(::getpid()));
  fs::remove_all(root);
  data::make_shapes_dataset({.out = (root / "shapes").string(),
                             .n_train = 16,
                             .n_val = 4,
                             .imgsz = 64,
                             .classes = 2,
                             .seed = 0});
  auto log_into = [](Shown& shown) {
    return [&shown](const std::string& line) { shown.log += line + "\n"; };
  };

  // A whole run: 2 epochs, a checkpoint per epoch.
  Shown whole;
  models::train(short_run(root, whole), log_into(whole));
  const fs::path run = root / "run";
  check_or_write("whole.log", normalised(whole.log, root.string()));
  check_or_write("whole.hooks", normalised(whole.hooks, root.string()));
  CHECK(whole.hooks.find("fit_epoch_end 0\nmodel_save " + (run / "weights").string() +
                         "/last.safetensors\nmodel_save " + (run / "weights").string() +
                         "/best.safetensors\n") != std::string::npos);
  check_or_write("results.csv", normalised(read_text(run / "results.csv"), root.string()));
  check_or_write("results.jsonl", normalised(read_text(run / "results.jsonl"), root.string()));
  // Each epoch's seconds split: its steps and its validation took time, epoch 0's end
  // checkpoint (written after its record) counts in epoch 1's, and the parts fit the whole.
  std::ifstream records(run / "results.jsonl");
  std::vector<models::EpochMetrics> epochs;
  for (std::string line; std::getline(records, line);)
    epochs.push_back(models::parse_epoch_metrics_json(line));
  REQUIRE(epochs.size() == 2);
  for (const models::EpochMetrics& m : epochs) {
    CAPTURE(m.epoch);
    CHECK(m.train_seconds > 0);
    CHECK(m.val_seconds > 0);
    CHECK(m.train_seconds + m.val_seconds + m.checkpoint_seconds <= m.epoch_seconds);
  }
  CHECK(epochs[1].checkpoint_seconds > 0);
  check_or_write("report.html", normalised(read_text(run / "report.html"), root.string(), true));

  // Stopped after 5 optimizer steps (in epoch 2), then resumed to the end.
  fs::remove_all(run);
  Shown stopped, resumed;
  models::TrainOptions first = short_run(root, stopped);
  first.max_steps = 5;
  models::train(first, log_into(stopped));
  models::TrainOptions again = short_run(root, resumed);
  again.run_dir.clear();
  again.resume = (run / "weights" / "last.safetensors").string();
  models::train(again, log_into(resumed));
  check_or_write("stopped.log", normalised(stopped.log + stopped.hooks, root.string()));
  check_or_write("resumed.log", normalised(resumed.log + resumed.hooks, root.string()));
  fs::remove_all(root);
  if (writing_fixtures())
    FAIL("wrote tests/fixtures/outputs; run again without BAREYOLO_WRITE_OUTPUT_FIXTURES");
}
