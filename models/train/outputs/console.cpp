// models/train/outputs/console.cpp — see console.h.
#include "models/train/outputs/console.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>

#include "models/train/outputs/report.h"
#include "models/train/run_dir.h"

namespace bareyolo::models {

namespace {

// "0.12", or with several ranks "0.12 (ranks 0.12 0.03)": the fraction of the steps' time spent
// waiting for their batches (results.csv's x/data_wait is the first number).
std::string data_wait_text(const EpochMetrics& m) {
  auto fraction_text = [](double fraction) {
    char text[16];
    std::snprintf(text, sizeof text, "%.2f", fraction);
    return std::string(text);
  };
  std::string text = fraction_text(m.data_wait);
  if (m.data_wait_per_rank.size() > 1) {
    text += " (ranks";
    for (double fraction : m.data_wait_per_rank) text += " " + fraction_text(fraction);
    text += ")";
  }
  return text;
}

// "train 12.3 s  val 1.4 s  checkpoint 0.2 s": where the epoch's seconds went (EpochMetrics).
std::string seconds_split_text(const EpochMetrics& m) {
  char text[96];
  std::snprintf(text, sizeof text, "train %.1f s  val %.1f s  checkpoint %.1f s", m.train_seconds,
                m.val_seconds, m.checkpoint_seconds);
  return text;
}

}  // namespace

TrainCallbacks console_logger(std::function<void(const std::string&)> log) {
  struct State {
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    TrainStartInfo run;
  };
  auto state = std::make_shared<State>();
  TrainCallbacks callbacks;
  callbacks.on_train_start = [state, log](const TrainStartInfo& run) {
    state->run = run;
    std::ostringstream line;
    line << (run.resumed ? "resuming " : "training ") << run.cfg << " (" << run.parameters
         << " parameters) on " << run.images << " images, " << run.names.size() << " classes, "
         << run.imgsz << " px, batch " << run.batch << ", accumulate " << run.accumulate << ", "
         << run.optimizer << ", " << run.epochs << " epochs -> " << run.run_dir;
    if (run.resumed)
      line << " (from epoch " << run.start_epoch + 1 << ", batch " << run.resume_batch << ")";
    log(line.str());
  };
  callbacks.on_val_end = [state, log](const ValidationReport& report) {
    log(validation_table(report.metrics, report.images, report.labels, state->run.names));
  };
  callbacks.on_fit_epoch_end = [state, log](const EpochMetrics& m) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - state->start).count();
    std::ostringstream line;
    line.precision(4);
    line << "epoch " << m.epoch + 1 << "/" << state->run.epochs << "  box " << m.train_box
         << "  obj " << m.train_obj << "  cls " << m.train_cls;
    if (m.validated)
      line << "  mAP50 " << m.map50 << "  mAP50-95 " << m.map50_95;
    else
      line << "  not validated (--no-val)";
    line << "  data_wait " << data_wait_text(m) << "  " << seconds_split_text(m) << "  (" << seconds
         << " s)";
    log(line.str());
  };
  callbacks.on_train_end = [log](const TrainEndInfo& end) {
    if (end.stopped_early)
      log("stopping early: no improvement in the last " + std::to_string(end.patience) +
          " validations (best at epoch " + std::to_string(end.best_epoch + 1) + ")");
    if (!end.finished)
      log("stopped after " + std::to_string(end.optimizer_steps) + " optimizer steps " +
          "(--max-steps); continue with --resume " + last_checkpoint(end.run_dir));
  };
  return callbacks;
}

}  // namespace bareyolo::models
