// models/train/flat_yaml.h — the `key: value` yaml files that --hyp and --config take, read one
// way: a map of single values, each key once. yaml-cpp keeps a repeated key as a second entry,
// so a reader that assigns in order takes the last and one that skips what is set takes the
// first; a repeated key is therefore refused, naming both lines.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace bareyolo::models {

struct FlatYamlEntry {
  std::string key;
  YAML::Node value;  // a scalar (FlatYamlValues::lists_and_nulls: or a list of them, or null)
  int line = 0;      // 1-based, for messages
};

// What a value may be: one scalar (--hyp), or also null and a list of scalars (--config, which
// reads YOLOv5's opt.yaml: `evolve: null`, `freeze: [0]`).
enum class FlatYamlValues { scalars, lists_and_nulls };

// The entries of `path` in file order. Throws std::invalid_argument beginning with
// "<flag> <path>" (and the line where there is one) when the file cannot be read, is not yaml,
// not a map, has a key or a value that is not a single value, or repeats a key.
std::vector<FlatYamlEntry> read_flat_yaml(const std::string& path, const std::string& flag,
                                          FlatYamlValues values = FlatYamlValues::scalars);
// The same for the file's text (`path` only names it in messages).
std::vector<FlatYamlEntry> parse_flat_yaml(const std::string& yaml_text, const std::string& path,
                                           const std::string& flag,
                                           FlatYamlValues values = FlatYamlValues::scalars);

}  // namespace bareyolo::models
