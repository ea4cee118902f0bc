// engine/shipped_files.cpp — see shipped_files.h.
#include "engine/shipped_files.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace bareyolo {

namespace {

namespace fs = std::filesystem;

// The folders that may hold the shipped files, in the order they are tried.
std::vector<fs::path> shipped_roots() {
  std::vector<fs::path> roots;
  if (const char* home = std::getenv("BAREYOLO_HOME"); home && *home) roots.emplace_back(home);
  std::error_code error;
  const fs::path executable = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    const fs::path folder = executable.parent_path();
    roots.push_back(folder);                                       // staged beside the binary
    roots.push_back(folder.parent_path());                         // build/ in the checkout
    roots.push_back(folder.parent_path() / "share" / "bareyolo");  // installed: PREFIX/bin
  }
  return roots;
}

}  // namespace

std::optional<std::string> find_shipped_file(const std::string& relative) {
  for (const fs::path& root : shipped_roots()) {
    std::error_code error;
    if (fs::is_regular_file(root / relative, error)) return (root / relative).string();
  }
  return std::nullopt;
}

std::string shipped_file(const std::string& relative) {
  if (std::optional<std::string> found = find_shipped_file(relative)) return *found;
  std::string looked;
  for (const fs::path& root : shipped_roots()) looked += "\n  " + (root / relative).string();
  throw std::runtime_error(relative + " is not among bareyolo's shipped files; looked for:" +
                           looked + "\nset BAREYOLO_HOME to the folder that holds " + relative);
}

}  // namespace bareyolo
