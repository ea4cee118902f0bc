// models/train/launch.h — from `--device` to training ranks: the one entry point of
// `bareyolo train` and of the C++ API.
//
// run_training() decides, from the options and the environment, how this process trains:
//   - a launcher's worker (torchrun, srun, mpirun, or bareyolo's own spawn): join the job
//     (dist::init_process_group), agree on the configuration with the other ranks
//     (rank_agreement.h) and train one rank; rank 0 resolves the run directory and publishes
//     it through the store, so every rank writes (rank 0) or reads the same one. A job of one
//     rank (WORLD_SIZE=1) has no store and nobody to tell: it trains as one process;
//   - more than one rank asked for and no launcher: check what can be checked here (dataset,
//     model, batch divisibility — before any worker starts), resolve the run directory, and
//     fork one worker per rank (dist::launch_workers); the workers train and _exit; this
//     process waits, supervises, and returns what rank 0 left in the run directory;
//   - one rank: train here.
// A --resume request takes its checkpoint's configuration first (resolved_request,
// checkpoint.h). `--batch -1` (AutoBatch) is resolved next: on the CPU a default with a
// message; on GPUs the probe runs once (in a probe child, so this process never initialises
// CUDA) and the global batch is derived by models::global_autobatch. Each rank's RunContext
// then carries the batch plan (plan_batch, run_context.h) the trainer follows.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

#include "models/train/trainer.h"

namespace bareyolo::models {

// What run_training throws when SIGINT or SIGTERM asked bareyolo's launcher to stop: it has
// stopped its workers. what() says so and where the run can be continued from; a command exits
// with exit_status(), the shell's convention for a process ended by that signal.
class TrainingInterrupted : public std::runtime_error {
 public:
  TrainingInterrupted(int signal, const std::string& message)
      : std::runtime_error(message), signal_(signal) {}
  int exit_status() const { return 128 + signal_; }

 private:
  int signal_;
};

// Trains as described above; returns rank 0's summary (in a spawned run: best fitness and
// epochs read back from the run directory). Throws on bad input before any worker starts
// where it can, when a worker failed (naming it), and TrainingInterrupted when stopped by a
// signal.
TrainSummary run_training(const TrainOptions& request,
                          const std::function<void(const std::string&)>& log);

// The CPU rank count of `--device auto` on a machine without GPUs: as many ranks as there
// are cores (at most 8), lowered until the global batch divides evenly.
int default_cpu_ranks(int cores, int batch);

}  // namespace bareyolo::models
