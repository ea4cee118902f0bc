// models/train/checkpointer.cpp — see checkpointer.h.
#include "models/train/checkpointer.h"

#include <filesystem>

#include "engine/trace.h"
#include "models/yolo/weights.h"

namespace bareyolo::models {

namespace {

// At most one checkpoint waits behind the one being written: each holds a whole checkpoint's
// bytes in host memory, so a disk slower than the saves makes the next save wait for it
// rather than letting those bytes pile up.
constexpr size_t kMaxQueuedCheckpoints = 2;

}  // namespace

Checkpointer::Checkpointer(std::string run_dir, CheckpointPolicy policy, bool writes,
                           std::function<SafetensorsFile()> snapshot,
                           std::function<void(const std::string& path)> saved)
    : run_dir_(std::move(run_dir)),
      policy_(policy),
      snapshot_(std::move(snapshot)),
      saved_(std::move(saved)) {
  if (!writes) return;
  std::filesystem::create_directories(std::filesystem::path(run_dir_) / "weights");
  writer_.emplace(kMaxQueuedCheckpoints);
}

// The writer's destructor runs the queued writes. Their files are not reported, nor a failure
// rethrown: a normal end has called wait(), which did both, so only an exception that is
// already ending the run gets here with writes pending, and that exception is the one to
// report (a failed write has left the previous file at its path intact).
Checkpointer::~Checkpointer() = default;

std::string Checkpointer::path(const std::string& file) const {
  return (std::filesystem::path(run_dir_) / "weights" / file).string();
}

void Checkpointer::after_step(int64_t optimizer_steps, bool run_ends_here) {
  report_written();
  std::vector<std::string> files;
  const bool periodic = policy_.save_steps > 0 && optimizer_steps % policy_.save_steps == 0;
  if (periodic) files.push_back("step" + std::to_string(optimizer_steps) + ".safetensors");
  if (periodic || run_ends_here) files.push_back("last.safetensors");
  save(files);
  if (run_ends_here) save_held_best();
}

void Checkpointer::after_epoch(int epoch, bool is_best, bool run_ends_here) {
  report_written();
  if (policy_.nosave && !run_ends_here) {
    if (is_best && writer_) held_best_ = snapshot_();
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
  write_in_background(std::move(*held_best_), {"best.safetensors"});
  held_best_.reset();
}

void Checkpointer::final_weights(const std::vector<StateEntry>& weights, int nc,
                                 const std::vector<std::string>& names, const std::string& cfg,
                                 const std::string& yaml) {
  wait();  // best.safetensors and last.safetensors are read here
  if (!writer_) return;
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

void Checkpointer::wait() {
  if (writer_) writer_->wait();
  report_written();
}

void Checkpointer::save(const std::vector<std::string>& files) {
  if (!writer_ || files.empty()) return;
  std::string names;
  for (const std::string& name : files) names += (names.empty() ? "" : " ") + name;
  // What the step waits for: the snapshot, and room on the writer when it is behind.
  const trace::Range traced(trace::Track::compute, "checkpoint", names);
  write_in_background(snapshot_(), files);
}

void Checkpointer::write_in_background(SafetensorsFile checkpoint, std::vector<std::string> files) {
  // Every file of the moment is written from the snapshot's own records (save() writes them
  // where they are), so the files are the same bytes and no second copy of them is made.
  writer_->queue([this, checkpoint = std::move(checkpoint),
                  files = std::move(files)](std::vector<std::string>& written) {
    for (const std::string& name : files) {
      checkpoint.save(path(name));
      written.push_back(path(name));
    }
    if (policy_.save_total_limit > 0)
      prune_periodic_checkpoints(path(""), policy_.save_total_limit);
  });
}

void Checkpointer::report_written() {
  if (!writer_) return;
  const BackgroundWriter::Finished finished = writer_->take_finished();
  for (const std::string& file : finished.written) saved_(file);
  if (finished.failure) std::rethrow_exception(finished.failure);
}

}  // namespace bareyolo::models
