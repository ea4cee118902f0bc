// models/train/flat_yaml.cpp — see flat_yaml.h.
#include "models/train/flat_yaml.h"

#include <map>
#include <stdexcept>

namespace bareyolo::models {

std::vector<FlatYamlEntry> read_flat_yaml(const std::string& path, const std::string& flag) {
  const std::string source = flag + " " + path;
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(source + ": cannot read it as yaml: " + e.what());
  }
  if (!root.IsMap()) throw std::invalid_argument(source + ": expected key: value lines");
  std::vector<FlatYamlEntry> entries;
  std::map<std::string, int> first_line;
  for (const auto& item : root) {
    FlatYamlEntry entry{item.first.as<std::string>(), item.second, item.first.Mark().line + 1};
    const std::string where = source + ":" + std::to_string(entry.line) + ": '" + entry.key + "'";
    if (auto [seen, fresh] = first_line.emplace(entry.key, entry.line); !fresh)
      throw std::invalid_argument(where + " is given twice (first on line " +
                                  std::to_string(seen->second) + "); keep one");
    if (entry.value.IsNull()) throw std::invalid_argument(where + " has no value");
    if (!entry.value.IsScalar()) throw std::invalid_argument(where + " must be a single value");
    entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace bareyolo::models
