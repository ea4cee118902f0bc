// models/train/checkpointer.h — the snapshot step of the training loop: which checkpoint files
// a moment of the run writes (checkpoint.h says what one holds), written atomically by rank 0
// alone, the periodic ones pruned to the newest --save-total-limit, and at the end the best
// weights alone. Every file written is reported to `saved` (on_model_save).
//
// The snapshot (the checkpoint's bytes on the host) is taken on the calling thread when asked:
// it reads the model, which the next step changes. Its files are written on one background
// thread (background_writer.h) in the order asked for, each atomically as before (a killed run
// leaves each file's previous version or its new one); a save that finds two checkpoints queued
// waits for the first. `saved` still runs on the calling thread, in the same order: each call
// reports the files finished since the last, then rethrows a failed write's error (`cannot
// save 'PATH' ...`), after which nothing more is written. wait() waits for every file asked
// for; final_weights() waits first, and so does the destructor, which reports nothing more and
// never throws.
//
//   after an optimizer step   weights/step<N>.safetensors every --save-steps steps, and
//                             last.safetensors then or when --max-steps ends the run there
//   after an epoch            last.safetensors; best.safetensors when the epoch is the best
//                             so far; epoch<N>.safetensors every --save-period epochs
//   when training finished    final.safetensors: best.safetensors' EMA weights alone; then
//                             best and last are stripped (checkpoint.h: stripped_checkpoint)
//
// --nosave (YOLOv5's: only the final checkpoint) writes none of these before the run ends (its
// last epoch, an early stop, --max-steps): there last is written, and best, held in memory
// since its epoch (one checkpoint's bytes; YOLOv5 writes best.pt only when the last epoch is
// the best, which would leave final without the best weights).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/safetensors.h"
#include "models/train/background_writer.h"
#include "models/train/checkpoint.h"

namespace bareyolo::models {

struct CheckpointPolicy {
  int64_t save_steps = 0;    // 0: no step checkpoints
  int save_period = 0;       // 0: no epoch checkpoints
  int save_total_limit = 0;  // 0: keep every periodic checkpoint
  bool nosave = false;       // nothing written before the run ends (no periodic ones then)
};

class Checkpointer {
 public:
  // `snapshot` makes the checkpoint of the run as it is when called; `writes` is false on
  // every rank but 0, whose calls then do nothing.
  Checkpointer(std::string run_dir, CheckpointPolicy policy, bool writes,
               std::function<SafetensorsFile()> snapshot,
               std::function<void(const std::string& path)> saved);
  ~Checkpointer();  // waits for the queued writes (background_writer.h)
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  void after_step(int64_t optimizer_steps, bool run_ends_here);
  void after_epoch(int epoch, bool is_best, bool run_ends_here);
  // `weights`: entries to load best.safetensors' model.* into and save (the EMA model's) as
  // final.safetensors; best and last.safetensors are then stripped to their EMA weights in
  // fp16, as YOLOv5 strips best.pt and last.pt.
  void final_weights(const std::vector<StateEntry>& weights, int nc,
                     const std::vector<std::string>& names, const std::string& cfg,
                     const std::string& yaml);
  // Until every file asked for is written; reports them, then rethrows a failed write's error.
  // What reads the run's weights after training waits here first.
  void wait();

  std::string path(const std::string& file) const;  // run_dir/weights/file

 private:
  void save(const std::vector<std::string>& files);
  void save_held_best();  // --nosave: at the run's end
  // Queues the writes of `checkpoint` to `files` (then the pruning) on the writer.
  void write_in_background(SafetensorsFile checkpoint, std::vector<std::string> files);
  // `saved` for each file the writer finished since the last call; rethrows its failure.
  void report_written();

  const std::string run_dir_;
  const CheckpointPolicy policy_;
  std::function<SafetensorsFile()> snapshot_;
  std::optional<SafetensorsFile> held_best_;  // --nosave: the best epoch's, not yet written
  std::function<void(const std::string&)> saved_;
  // Rank 0's alone (the others write nothing). Last: destroyed, so finishing its writes,
  // before the members they use.
  std::optional<BackgroundWriter> writer_;
};

}  // namespace bareyolo::models
