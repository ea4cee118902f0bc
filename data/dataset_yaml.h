// data/dataset_yaml.h — the dataset description file (YOLOv5's data yaml):
//
//   path: ../datasets/coco128    # root; relative to the yaml's own folder (default: that folder),
//                                #   else, where that does not exist, as YOLOv5 resolves it
//                                #   (the working directory, then the yaml's parent folder), with
//                                #   a note; an absolute one that does not exist falls back to
//                                #   the yaml's folder with a warning (the dataset was moved)
//   train: images/train          # a folder, a .txt list of images, or a list of those
//   val: images/val              #   (relative entries are joined to `path`)
//   test:                        # optional
//   nc: 80                       # optional; must equal the number of names
//   names: [person, bicycle]     # a list, or a map {0: person, 1: bicycle} with keys 0..n-1
//
// Differences from YOLOv5, on purpose: a relative `path` is taken first from the yaml's folder
// (YOLOv5's install folder only where that does not exist), a missing absolute one falls back to
// the yaml's folder (YOLOv5 fails), and a `nc` that disagrees with `names` is an error instead of
// being silently overwritten. docs/data.md has the rule beside YOLOv5's and Ultralytics'.
#pragma once

#include <string>
#include <vector>

namespace bareyolo::data {

struct DatasetConfig {
  std::string yaml_file;
  std::string root;                           // `path`, absolute
  std::vector<std::string> train, val, test;  // sources, absolute; test may be empty
  std::vector<std::string> names;             // class names, index = class id
  int num_classes() const { return static_cast<int>(names.size()); }
};

// Throws std::runtime_error naming the yaml file and the key for anything missing or wrong.
DatasetConfig read_dataset_yaml(const std::string& yaml_file);
// The same for the file's text: `yaml_file` names it in messages, and its folder is the root
// that relative paths start from.
DatasetConfig parse_dataset_yaml(const std::string& yaml_text, const std::string& yaml_file);

// The sources of a split by name: "train", "val" or "test".
const std::vector<std::string>& split_sources(const DatasetConfig& config,
                                              const std::string& split);

}  // namespace bareyolo::data
