// tests/support/kept_checkpoint.h — the full checkpoint a run wrote last, for tests that read
// its raw weights or optimizer state after the run: when training finishes, last.safetensors is
// stripped to its fp16 EMA weights (models/train/checkpointer.h), so such a test keeps a copy
// of each last.safetensors as it is written. The copy is made by the callback, in rank 0's
// process (a spawned worker's too), before the next write replaces the file.
#pragma once

#include <filesystem>
#include <string>

#include "models/train/callbacks.h"

namespace bareyolo::testing {

inline models::TrainCallbacks keep_last_checkpoint(const std::filesystem::path& copy) {
  models::TrainCallbacks callbacks;
  callbacks.on_model_save = [copy](const std::string& path) {
    if (std::filesystem::path(path).filename() == "last.safetensors")
      std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
  };
  return callbacks;
}

}  // namespace bareyolo::testing
