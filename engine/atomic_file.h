// engine/atomic_file.h — replace a file so that readers, and a crash at any moment, see
// either the old content or the new, never a mix: checkpoints must survive a killed job.
//
// The new content goes to a temporary file in the target's directory (same file system, so
// the rename is atomic), which is fsynced, renamed over the target, and then the directory is
// fsynced so the rename itself is durable.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace bareyolo {

// Writes the concatenation of `pieces` to `path`. Throws std::runtime_error naming the path
// and the system error; on failure the temporary file is removed and an existing file at
// `path` is unchanged.
void write_file_atomically(const std::string& path,
                           const std::vector<std::span<const uint8_t>>& pieces);

}  // namespace bareyolo
