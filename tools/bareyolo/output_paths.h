// tools/bareyolo/output_paths.h — outputs that never overwrite inputs. A command lists what
// it will write and what it reads, and checks them before it writes anything: a mistyped --out
// must not replace the user's images or weights with drawn copies or converted ones, and two
// inputs must not write one output (the second silently replacing the first).
#pragma once

#include <string>
#include <vector>

namespace bareyolo::cli {

// A file a command reads or writes, with its role in words for messages ("the --weights file",
// "the drawn copy of a/x.jpg").
struct RolePath {
  std::string path;
  std::string role;
};

// Throws std::invalid_argument, naming both paths and ending with `what_to_do`, when an output
// is an existing input file: the same file by any name (relative, absolute, through a
// symlink, a hard link).
void require_outputs_spare_inputs(const std::vector<RolePath>& outputs,
                                  const std::vector<RolePath>& inputs,
                                  const std::string& what_to_do);

// Throws std::invalid_argument, naming both roles and the path, when two outputs are the same
// path.
void require_distinct_outputs(const std::vector<RolePath>& outputs, const std::string& what_to_do);

}  // namespace bareyolo::cli
