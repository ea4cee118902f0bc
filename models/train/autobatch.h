// models/train/autobatch.h — `--batch -1`: the largest global batch that fits the GPUs.
//
// YOLOv5's AutoBatch on one device: train steps at batch 1, 2, 4, 8, 16 measure the memory
// used (decimal GB; at imgsz, or with --multi-scale at the largest size it draws); a line
// y = p0 * b + p1 fitted to them predicts the batch that fills 80% of the free memory (GiB).
// Sizes that failed (out of memory) bound the answer from above; an answer outside [1, 1024]
// falls back to 16. When only one size ran (1, the rest out of memory) it is the answer, where
// YOLOv5 would fit a line to one point.
//
// Under data parallelism the probe runs once, on the first GPU (bareyolo's launcher: in a
// short-lived child, so the parent never initialises CUDA; an external launcher: on rank 0,
// which broadcasts the answer). The global batch is then the per-device answer times the
// world size, capped at nbs (a larger batch would not train differently: accumulation
// already reaches nbs), and rounded down to a multiple of the world size so every rank gets
// the same share. The memory probe is a function, so this logic is tested without a GPU.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "models/train/options.h"

namespace bareyolo::models {

struct DeviceMemory {
  double total_gib = 0, reserved_gib = 0, allocated_gib = 0;
};

// Memory (decimal GB) a training step at `batch` images used, or nothing when it failed.
using MemoryProbe = std::function<std::optional<double>(int batch)>;

struct AutobatchResult {
  int batch = 16;       // per device
  std::string message;  // what was measured and chosen, for the log
};

// The per-device batch, as YOLOv5's autobatch(fraction = 0.8) chooses it.
AutobatchResult autobatch_per_device(const DeviceMemory& memory, const MemoryProbe& probe);

// autobatch_per_device of the run `options` describe on GPU `gpu`: training steps of its model
// on blank images, the peak memory the caching allocator reserved for each; a batch that
// runs out of device memory does not fit (any other failure is an error). Logs the message
// and returns the per-device batch.
int probe_autobatch(const TrainOptions& options, int gpu,
                    const std::function<void(const std::string&)>& log);

// The global batch for `world` ranks: per_device x world, capped at nbs, rounded down to a
// multiple of world (never below world). `message` says what happened.
int global_autobatch(int per_device, int world, int nbs, std::string* message = nullptr);

}  // namespace bareyolo::models
