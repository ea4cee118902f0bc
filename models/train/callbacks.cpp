// models/train/callbacks.cpp — the built-in loggers (see callbacks.h).
#include "models/train/callbacks.h"

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "engine/json_numbers.h"

namespace bareyolo::models {

namespace {

// An append-mode text file that a logger owns; (re)created with the history at train start.
struct LogFile {
  std::string path;
  std::ofstream out;

  void restart(const std::string& text) {
    out.close();
    out.open(path, std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write '" + path + "': check the run directory");
    write(text);
  }
  void write(const std::string& text) {
    out << text;
    out.flush();
    if (!out) throw std::runtime_error("cannot write '" + path + "' (disk full?)");
  }
};

// The keys of the numbers only validation gives: null in the JSON, empty in results.csv, for
// an epoch that was not validated (--no-val), so that no reader takes them for a measured 0.
bool validation_key(const std::string& key) {
  return key.rfind("metrics/", 0) == 0 || key.rfind("val/", 0) == 0 || key == "fitness";
}

nlohmann::json to_json(const EpochMetrics& m) {
  nlohmann::json j = {{"epoch", m.epoch},
                      {"train/box_loss", m.train_box},
                      {"train/obj_loss", m.train_obj},
                      {"train/cls_loss", m.train_cls},
                      {"metrics/precision", m.precision},
                      {"metrics/recall", m.recall},
                      {"metrics/mAP_0.5", m.map50},
                      {"metrics/mAP_0.5:0.95", m.map50_95},
                      {"val/box_loss", m.val_box},
                      {"val/obj_loss", m.val_obj},
                      {"val/cls_loss", m.val_cls},
                      {"x/lr0", m.lr0},
                      {"x/lr1", m.lr1},
                      {"x/lr2", m.lr2},
                      {"x/data_wait", m.data_wait},
                      {"x/data_wait_per_rank", m.data_wait_per_rank},
                      {"host_waits", m.host_waits},
                      {"fitness", m.fitness},
                      {"validated", m.validated},
                      {"epoch_seconds", m.epoch_seconds},
                      {"train_seconds", m.train_seconds},
                      {"val_seconds", m.val_seconds},
                      {"checkpoint_seconds", m.checkpoint_seconds},
                      {"step_seconds", m.step_seconds}};
  if (!m.validated)
    for (auto& [key, value] : j.items())
      if (validation_key(key)) value = nullptr;
  return j;
}

}  // namespace

std::string epoch_metrics_json(const EpochMetrics& m) { return to_json(m).dump(); }

EpochMetrics parse_epoch_metrics_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  auto get = [&](const char* key) {
    if (!j.contains(key))
      throw std::invalid_argument("epoch record without '" + std::string(key) + "': " + text);
    return j.at(key);
  };
  // A validation number: null when the epoch was not validated (0 in EpochMetrics then).
  auto measured = [&](const char* key) {
    const nlohmann::json value = get(key);
    return value.is_null() ? 0.0 : value.get<double>();
  };
  EpochMetrics m;
  read_whole_number(get("epoch"), m.epoch, "an epoch record's 'epoch'");
  m.train_box = get("train/box_loss");
  m.train_obj = get("train/obj_loss");
  m.train_cls = get("train/cls_loss");
  m.precision = measured("metrics/precision");
  m.recall = measured("metrics/recall");
  m.map50 = measured("metrics/mAP_0.5");
  m.map50_95 = measured("metrics/mAP_0.5:0.95");
  m.val_box = measured("val/box_loss");
  m.val_obj = measured("val/obj_loss");
  m.val_cls = measured("val/cls_loss");
  m.lr0 = get("x/lr0");
  m.lr1 = get("x/lr1");
  m.lr2 = get("x/lr2");
  m.fitness = measured("fitness");
  m.validated = get("validated");
  m.epoch_seconds = get("epoch_seconds");
  m.step_seconds = get("step_seconds");
  // Absent in checkpoints written before the loader's waits were measured.
  m.data_wait = j.value("x/data_wait", 0.0);
  m.data_wait_per_rank = j.value("x/data_wait_per_rank", std::vector<double>{});
  m.host_waits = j.value("host_waits", 0.0);
  // Absent in checkpoints written before an epoch's seconds were split (epoch_seconds was then
  // the training steps' alone).
  m.train_seconds = j.value("train_seconds", m.epoch_seconds);
  m.val_seconds = j.value("val_seconds", 0.0);
  m.checkpoint_seconds = j.value("checkpoint_seconds", 0.0);
  return m;
}

std::string results_csv_header() {
  return "epoch,train/box_loss,train/obj_loss,train/cls_loss,metrics/precision,metrics/recall,"
         "metrics/mAP_0.5,metrics/mAP_0.5:0.95,val/box_loss,val/obj_loss,val/cls_loss,x/lr0,"
         "x/lr1,x/lr2,x/data_wait\n";
}

std::string results_csv_row(const EpochMetrics& m) {
  std::ostringstream row;
  row.precision(6);
  row << m.epoch;
  for (double v : {m.train_box, m.train_obj, m.train_cls}) row << ',' << v;
  // Empty (a missing value to pandas and spreadsheets) for an epoch that was not validated.
  for (double v : {m.precision, m.recall, m.map50, m.map50_95, m.val_box, m.val_obj, m.val_cls}) {
    row << ',';
    if (m.validated) row << v;
  }
  for (double v : {m.lr0, m.lr1, m.lr2, m.data_wait}) row << ',' << v;
  row << '\n';
  return row.str();
}

TrainCallbacks csv_logger(const std::string& path) {
  auto file = std::make_shared<LogFile>(LogFile{path, {}});
  TrainCallbacks callbacks;
  callbacks.on_train_start = [file](const TrainStartInfo& info) {
    std::string text = results_csv_header();
    for (const EpochMetrics& m : info.history) text += results_csv_row(m);
    file->restart(text);
  };
  callbacks.on_fit_epoch_end = [file](const EpochMetrics& m) { file->write(results_csv_row(m)); };
  return callbacks;
}

TrainCallbacks jsonl_logger(const std::string& path) {
  auto file = std::make_shared<LogFile>(LogFile{path, {}});
  TrainCallbacks callbacks;
  callbacks.on_train_start = [file](const TrainStartInfo& info) {
    std::string text;
    for (const EpochMetrics& m : info.history) text += epoch_metrics_json(m) + "\n";
    file->restart(text);
  };
  callbacks.on_fit_epoch_end = [file](const EpochMetrics& m) {
    file->write(epoch_metrics_json(m) + "\n");
  };
  return callbacks;
}

}  // namespace bareyolo::models
