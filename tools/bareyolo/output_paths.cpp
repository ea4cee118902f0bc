// tools/bareyolo/output_paths.cpp — see output_paths.h.
#include "tools/bareyolo/output_paths.h"

#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>

namespace bareyolo::cli {

namespace {

namespace fs = std::filesystem;

// A file's identity, (device, inode): one key for every name it has. None for a path that
// names no existing file (an output not written yet cannot be an input).
std::optional<std::pair<dev_t, ino_t>> file_identity(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) return std::nullopt;
  return std::pair{status.st_dev, status.st_ino};
}

}  // namespace

void require_outputs_spare_inputs(const std::vector<RolePath>& outputs,
                                  const std::vector<RolePath>& inputs,
                                  const std::string& what_to_do) {
  std::map<std::pair<dev_t, ino_t>, const RolePath*> input_files;
  for (const RolePath& input : inputs)
    if (const auto identity = file_identity(input.path)) input_files.emplace(*identity, &input);
  for (const RolePath& output : outputs) {
    const auto identity = file_identity(output.path);
    if (!identity) continue;
    const auto input = input_files.find(*identity);
    if (input == input_files.end()) continue;
    throw std::invalid_argument(output.role + " would be written to '" + output.path +
                                "', which is " + input->second->role + " '" + input->second->path +
                                "': an output never overwrites an input; " + what_to_do +
                                " (nothing was written)");
  }
}

void require_distinct_outputs(const std::vector<RolePath>& outputs, const std::string& what_to_do) {
  std::map<std::string, const RolePath*> written;
  for (const RolePath& output : outputs) {
    const std::string key = fs::absolute(output.path).lexically_normal().string();
    const auto [earlier, inserted] = written.emplace(key, &output);
    if (!inserted)
      throw std::invalid_argument(earlier->second->role + " and " + output.role +
                                  " would both be written to '" + output.path + "'; " + what_to_do +
                                  " (nothing was written)");
  }
}

}  // namespace bareyolo::cli
