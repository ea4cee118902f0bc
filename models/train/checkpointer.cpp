// models/train/checkpointer.cpp — see checkpointer.h.
#include "models/train/checkpointer.h"

#include <filesystem>

#include "engine/trace.h"
#include "models/yolo/weights.h"

namespace bareyolo::models {

Checkpointer::Checkpointer(std::string run_dir, CheckpointPolicy policy, bool writes,
                           std::function<SafetensorsFile()> snapshot,
                           std::function<void(const std::string& path)> saved)
    : run_dir_(std::move(run_dir)),
      policy_(policy),
      writes_(writes),
      snapshot_(std::move(snapshot)),
      saved_(std::move(saved)) {
  if (writes_) std::filesystem::create_directories(std::filesystem::path(run_dir_) / "weights");
}

std::string Checkpointer::path(const std::string& file) const {
  return (std::filesystem::path(run_dir_) / "weights" / file).string();
}

void Checkpointer::after_step(int64_t optimizer_steps, bool run_ends_here) {
  std::vector<std::string> files;
  const bool periodic = policy_.save_steps > 0 && optimizer_steps % policy_.save_steps == 0;
  if (periodic) files.push_back("step" + std::to_string(optimizer_steps) + ".safetensors");
  if (periodic || run_ends_here) files.push_back("last.safetensors");
  save(files);
  if (run_ends_here) save_held_best();
}

void Checkpointer::after_epoch(int epoch, bool is_best, bool run_ends_here) {
  if (policy_.nosave && !run_ends_here) {
    if (is_best && writes_) held_best_ = snapshot_();
    return;
  }
  std::vector<std::string> files = {"last.safetensors"};
  if (is_best) {
    files.push_back("best.safetensors");
    held_best_.reset();  // an older best, superseded
  }
  if (policy_.save_period > 0 && (epoch + 1) % policy_.save_period == 0)
    files.push_back("epoch" + std::to_string(epoch + 1) + ".safetensors");
  save(files);
  save_held_best();
}

void Checkpointer::save_held_best() {
  if (!held_best_) return;
  held_best_->save(path("best.safetensors"));
  saved_(path("best.safetensors"));
  held_best_.reset();
}

void Checkpointer::final_weights(const std::vector<StateEntry>& weights, int nc,
                                 const std::vector<std::string>& names, const std::string& cfg,
                                 const std::string& yaml) {
  if (!writes_) return;
  const std::string best = path("best.safetensors");
  const SafetensorsFile best_checkpoint = SafetensorsFile::load(best);
  load_state(best_checkpoint, weights, best);
  const std::string final_path = path("final.safetensors");
  make_weights_file(weights, nc, names, cfg, yaml).save(final_path);
  saved_(final_path);
  // As YOLOv5's strip_optimizer on last.pt and best.pt: each keeps its EMA weights alone, in
  // fp16 (a quarter of the checkpoint's bytes); final keeps best's in f32. Until here both
  // were resumable checkpoints; a finished run is not resumed (checkpoint.h, open_resume).
  stripped_checkpoint(best_checkpoint, best).save(best);
  const std::string last = path("last.safetensors");
  stripped_checkpoint(SafetensorsFile::load(last), last).save(last);
}

void Checkpointer::save(const std::vector<std::string>& files) {
  if (!writes_ || files.empty()) return;
  const SafetensorsFile file = snapshot_();
  for (const std::string& name : files) {
    const trace::Range traced(trace::Track::compute, "checkpoint", name);
    file.save(path(name));
    saved_(path(name));
  }
  if (policy_.save_total_limit > 0) prune_periodic_checkpoints(path(""), policy_.save_total_limit);
}

}  // namespace bareyolo::models
