// data/dataset_yaml.cpp — reading and checking the dataset yaml (see dataset_yaml.h).
//
// yaml-cpp 0.7 reports a missing key or a wrong type as a bare "bad conversion" with no key
// name, so every read goes through a helper that names the key and the file.
#include "data/dataset_yaml.h"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "data/regular_file.h"

namespace fs = std::filesystem;

namespace bareyolo::data {

namespace {

[[noreturn]] void fail(const std::string& yaml_file, const std::string& what) {
  throw std::runtime_error(yaml_file + ": " + what);
}

std::string scalar(const YAML::Node& node, const std::string& key, const std::string& yaml_file) {
  if (!node.IsScalar())
    fail(yaml_file, "`" + key + "` must be a single value (line " +
                        std::to_string(node.Mark().line + 1) + ")");
  return node.Scalar();
}

// Joins a source to the root. YOLOv5's fallback: a "../x" that does not exist is tried as "x".
std::string resolve_source(const fs::path& root, const std::string& entry) {
  fs::path joined = fs::path(entry).is_absolute() ? fs::path(entry) : root / entry;
  if (!fs::exists(joined) && entry.rfind("../", 0) == 0 && fs::exists(root / entry.substr(3)))
    joined = root / entry.substr(3);
  return fs::absolute(joined).lexically_normal().string();
}

std::vector<std::string> read_sources(const YAML::Node& doc, const std::string& key,
                                      const fs::path& root, const std::string& yaml_file,
                                      bool required) {
  YAML::Node node = doc[key];
  if (!node || node.IsNull()) {
    if (required) fail(yaml_file, "the required key `" + key + "` is missing");
    return {};
  }
  std::vector<std::string> sources;
  if (node.IsSequence()) {
    for (const YAML::Node& item : node)
      sources.push_back(resolve_source(root, scalar(item, key, yaml_file)));
  } else {
    sources.push_back(resolve_source(root, scalar(node, key, yaml_file)));
  }
  if (sources.empty() && required) fail(yaml_file, "`" + key + "` is an empty list");
  return sources;
}

std::vector<std::string> read_names(const YAML::Node& doc, const std::string& yaml_file) {
  YAML::Node node = doc["names"];
  if (!node || node.IsNull()) fail(yaml_file, "the required key `names` is missing");
  std::vector<std::string> names;
  if (node.IsSequence()) {
    for (const YAML::Node& item : node) names.push_back(scalar(item, "names", yaml_file));
  } else if (node.IsMap()) {
    std::map<long, std::string> by_index;
    for (const auto& item : node) {
      std::string key = scalar(item.first, "names", yaml_file);
      char* end = nullptr;
      long index = std::strtol(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || index < 0)
        fail(yaml_file, "`names` key '" + key + "' is not a class index (0, 1, 2, ...)");
      by_index[index] = scalar(item.second, "names", yaml_file);
    }
    long expected = 0;
    for (const auto& [index, name] : by_index) {
      if (index != expected)
        fail(yaml_file, "`names` has no entry for class " + std::to_string(expected) +
                            ": the map's keys must be 0.." + std::to_string(by_index.size() - 1));
      names.push_back(name);
      ++expected;
    }
  } else {
    fail(yaml_file, "`names` must be a list or a map of class index to name");
  }
  if (names.empty()) fail(yaml_file, "`names` is empty: a dataset needs at least one class");
  return names;
}

// Prints `line` on stderr once per yaml and process, since launch, training and validation
// each read the yaml.
void say_once(const std::string& yaml_file, const std::string& line) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard lock(mutex);
  if (said.insert(yaml_file).second) std::fprintf(stderr, "bareyolo: %s\n", line.c_str());
}

// A dataset folder that was moved or copied keeps its yaml's absolute `path`, which then names
// a folder that is gone: the yaml's own folder is where the set most likely is now.
fs::path moved_root_fallback(const fs::path& path, const fs::path& yaml_folder,
                             const std::string& yaml_file) {
  say_once(yaml_file, "warning: " + yaml_file + ": `path` " + path.string() +
                          " does not exist (was the dataset moved?); using the yaml's own folder " +
                          yaml_folder.string() +
                          " instead — set `path` to the dataset's folder to silence this");
  return yaml_folder;
}

// A relative `path` is taken from the yaml's folder. YOLOv5 takes it from its own folder, the
// one its train.py runs in: usually the working directory, and the parent of the data/ folder
// that holds its stock yamls (`path: ../datasets/coco128`). Where the yaml-relative folder does
// not exist, those two are tried in that order, and a note says which was used.
fs::path relative_root(const fs::path& path, const fs::path& yaml_folder,
                       const std::string& yaml_file) {
  const fs::path beside_yaml = yaml_folder / path;
  if (fs::exists(beside_yaml)) return beside_yaml;
  const std::pair<fs::path, const char*> yolov5_folders[] = {
      {fs::current_path(), "the working directory"},
      {yaml_folder.parent_path(), "the yaml's parent folder"}};
  for (const auto& [folder, which] : yolov5_folders) {
    const fs::path candidate = (folder / path).lexically_normal();
    if (!fs::exists(candidate)) continue;
    say_once(yaml_file, "note: " + yaml_file + ": `path` " + path.string() + " is not beside " +
                            "the yaml; using " + candidate.string() + ", from " + which +
                            ", as YOLOv5 resolves it from its own folder");
    return candidate;
  }
  return beside_yaml;  // the error that follows names this folder
}

}  // namespace

DatasetConfig read_dataset_yaml(const std::string& yaml_file) {
  const FileContents contents = read_regular_file(yaml_file);
  if (contents.kind == FileContents::missing)
    throw std::runtime_error("dataset yaml " + yaml_file + " does not exist");
  if (contents.kind != FileContents::regular)
    throw std::runtime_error("dataset yaml " + yaml_file + " cannot be read: " + contents.error);
  return parse_dataset_yaml(contents.bytes, yaml_file);
}

DatasetConfig parse_dataset_yaml(const std::string& yaml_text, const std::string& yaml_file) {
  YAML::Node doc;
  try {
    doc = YAML::Load(yaml_text);
  } catch (const YAML::Exception& error) {
    fail(yaml_file, std::string("not valid yaml: ") + error.what());
  }
  if (!doc.IsMap()) fail(yaml_file, "expected a map of keys (path, train, val, names)");

  DatasetConfig config;
  config.yaml_file = yaml_file;
  fs::path yaml_folder = fs::absolute(yaml_file).parent_path();
  fs::path root = yaml_folder;
  if (doc["path"] && !doc["path"].IsNull()) {
    fs::path path = scalar(doc["path"], "path", yaml_file);
    if (!path.is_absolute())
      root = relative_root(path, yaml_folder, yaml_file);
    else if (fs::exists(path))
      root = path;
    else
      root = moved_root_fallback(path, yaml_folder, yaml_file);
  }
  root = root.lexically_normal();
  if (!root.has_filename()) root = root.parent_path();  // "/data/x/." -> "/data/x"
  config.root = root.string();
  config.train = read_sources(doc, "train", root, yaml_file, true);
  config.val = read_sources(doc, "val", root, yaml_file, true);
  config.test = read_sources(doc, "test", root, yaml_file, false);
  config.names = read_names(doc, yaml_file);

  if (doc["nc"] && !doc["nc"].IsNull()) {
    std::string nc_text = scalar(doc["nc"], "nc", yaml_file);
    char* end = nullptr;
    long nc = std::strtol(nc_text.c_str(), &end, 10);
    if (nc_text.empty() || *end != '\0')
      fail(yaml_file, "`nc` is '" + nc_text + "', not a whole number");
    if (nc != config.num_classes())
      fail(yaml_file, "`nc` is " + nc_text + " but `names` lists " +
                          std::to_string(config.num_classes()) +
                          " classes; make them agree (or drop `nc`: it is len(names))");
  }
  return config;
}

const std::vector<std::string>& split_sources(const DatasetConfig& config,
                                              const std::string& split) {
  if (split == "train") return config.train;
  if (split == "val") return config.val;
  if (split == "test") return config.test;
  throw std::invalid_argument("unknown split '" + split + "' (use train, val or test)");
}

}  // namespace bareyolo::data
