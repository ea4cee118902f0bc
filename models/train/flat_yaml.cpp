// models/train/flat_yaml.cpp — see flat_yaml.h.
#include "models/train/flat_yaml.h"

#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace bareyolo::models {

std::vector<FlatYamlEntry> read_flat_yaml(const std::string& path, const std::string& flag,
                                          FlatYamlValues values) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(flag + " " + path + ": cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  return parse_flat_yaml(text.str(), path, flag, values);
}

namespace {

// A list of single values (YOLOv5's `freeze: [0, 1]`).
bool is_list(const YAML::Node& node) {
  if (!node.IsSequence()) return false;
  for (const YAML::Node& item : node)
    if (!item.IsScalar()) return false;
  return true;
}

}  // namespace

std::vector<FlatYamlEntry> parse_flat_yaml(const std::string& yaml_text, const std::string& path,
                                           const std::string& flag, FlatYamlValues values) {
  const std::string source = flag + " " + path;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(source + ": cannot read it as yaml: " + e.what());
  }
  if (!root.IsMap()) throw std::invalid_argument(source + ": expected key: value lines");
  std::vector<FlatYamlEntry> entries;
  std::map<std::string, int> first_line;
  for (const auto& item : root) {
    if (!item.first.IsScalar())  // `[a, b]: 1`: yaml-cpp would only say "bad conversion"
      throw std::invalid_argument(source + ":" + std::to_string(item.first.Mark().line + 1) +
                                  ": a key must be a single name");
    FlatYamlEntry entry{item.first.Scalar(), item.second, item.first.Mark().line + 1};
    const std::string where = source + ":" + std::to_string(entry.line) + ": '" + entry.key + "'";
    if (auto [seen, fresh] = first_line.emplace(entry.key, entry.line); !fresh)
      throw std::invalid_argument(where + " is given twice (first on line " +
                                  std::to_string(seen->second) + "); keep one");
    const bool lenient = values == FlatYamlValues::lists_and_nulls;
    if (entry.value.IsNull() && !lenient) throw std::invalid_argument(where + " has no value");
    if (!entry.value.IsNull() && !entry.value.IsScalar() && !(lenient && is_list(entry.value)))
      throw std::invalid_argument(where + (lenient ? " must be a single value or a list of them"
                                                   : " must be a single value"));
    entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace bareyolo::models
