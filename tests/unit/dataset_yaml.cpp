// tests/unit/dataset_yaml.cpp — the dataset yaml (names as list or map, nc agreement, path
// resolution, error messages) and image discovery (folders, lists, the labels/ rule).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "data/dataset_yaml.h"
#include "data/image_files.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// The message of the std::runtime_error that `fn` throws ("" if none).
template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "";
}

// What `fn` writes on stderr (fd 2, where the yaml's notes go).
template <class Fn>
std::string stderr_of(Fn fn, const fs::path& scratch) {
  std::fflush(stderr);
  const int saved = ::dup(2);
  FILE* file = std::fopen(scratch.c_str(), "w");
  ::dup2(::fileno(file), 2);
  fn();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::fclose(file);
  std::ostringstream text;
  text << std::ifstream(scratch).rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE(
    "dataset yaml: names as a list or an index map, and paths resolve against path and the yaml "
    "folder") {
  TempDir dir;
  fs::create_directories(dir.path() / "sets" / "a" / "images" / "train");
  write_text(dir.path() / "sets" / "list.yaml",
             "path: a\ntrain: images/train\nval: [images/train, ../extra]\nnc: 2\n"
             "names: [cat, 'traffic light']\n");
  data::DatasetConfig list = data::read_dataset_yaml((dir.path() / "sets" / "list.yaml").string());
  CHECK(list.root == (dir.path() / "sets" / "a").string());
  REQUIRE(list.train.size() == 1);
  CHECK(list.train[0] == (dir.path() / "sets" / "a" / "images" / "train").string());
  REQUIRE(list.val.size() == 2);
  CHECK(list.val[1] == (dir.path() / "sets" / "extra").string());
  CHECK(list.test.empty());
  CHECK(list.names == std::vector<std::string>{"cat", "traffic light"});

  write_text(dir.path() / "map.yaml", "train: t\nval: v\nnames:\n  1: dog\n  0: cat\n");
  data::DatasetConfig map = data::read_dataset_yaml((dir.path() / "map.yaml").string());
  CHECK(map.root == dir.path().string());  // no `path`: the yaml's folder
  CHECK(map.names == std::vector<std::string>{"cat", "dog"});
  CHECK(map.num_classes() == 2);
}

TEST_CASE("a relative path not beside the yaml resolves from YOLOv5's folder, with a note") {
  // YOLOv5's layout: <root>/yolov5/data/set.yaml says `path: ../datasets/set`, meaning
  // <root>/datasets/set (from the yolov5 folder), not <root>/yolov5/datasets/set.
  TempDir dir;
  const fs::path yolov5 = dir.path() / "yolov5", set = dir.path() / "datasets" / "set";
  fs::create_directories(set / "images");
  write_text(yolov5 / "data" / "set.yaml",
             "path: ../datasets/set\ntrain: images\nval: images\n"
             "names: [a]\n");
  data::DatasetConfig config;
  const std::string said =
      stderr_of([&] { config = data::read_dataset_yaml((yolov5 / "data" / "set.yaml").string()); },
                dir.path() / "stderr.txt");
  CHECK(config.root == set.string());
  CHECK(config.train[0] == (set / "images").string());
  CHECK(said.find("note: ") != std::string::npos);
  CHECK(said.find("using " + set.string() + ", from the yaml's parent folder") !=
        std::string::npos);

  // Beside the yaml, where that exists, wins, without a note.
  fs::create_directories(yolov5 / "datasets" / "set");
  write_text(yolov5 / "data" / "again.yaml",
             "path: ../datasets/set\ntrain: t\nval: v\n"
             "names: [a]\n");
  const std::string quiet = stderr_of(
      [&] { config = data::read_dataset_yaml((yolov5 / "data" / "again.yaml").string()); },
      dir.path() / "stderr2.txt");
  CHECK(config.root == (yolov5 / "datasets" / "set").string());
  CHECK(quiet.empty());
}

TEST_CASE("dataset yaml errors name the file and the key") {
  TempDir dir;
  auto read = [&](const std::string& text) {
    write_text(dir.path() / "d.yaml", text);
    return error_of([&] { data::read_dataset_yaml((dir.path() / "d.yaml").string()); });
  };
  std::string nc = read("train: t\nval: v\nnc: 3\nnames: [a, b]\n");
  CHECK(nc.find("d.yaml") != std::string::npos);
  CHECK(nc.find("`nc` is 3 but `names` lists 2") != std::string::npos);
  CHECK(read("val: v\nnames: [a]\n").find("`train` is missing") != std::string::npos);
  CHECK(read("train: t\nval: v\n").find("`names` is missing") != std::string::npos);
  CHECK(read("train: t\nval: v\nnames: {0: a, 2: c}\n").find("no entry for class 1") !=
        std::string::npos);
  CHECK(read("train: t\nval: v\nnames: [a\n").find("not valid yaml") != std::string::npos);
  CHECK(read("train: t\nval: v\nnc: x\nnames: [a]\n").find("not a whole number") !=
        std::string::npos);
  CHECK(error_of([&] {
          data::read_dataset_yaml((dir.path() / "absent.yaml").string());
        }).find("does not exist") != std::string::npos);
}

TEST_CASE(
    "image discovery: folders recursively and txt lists relative to the list sorted and filtered") {
  TempDir dir;
  fs::path images = dir.path() / "images";
  for (const char* name : {"train/b.jpg", "train/a.PNG", "train/sub/c.bmp", "train/notes.txt"})
    write_text(images / name, "x");
  write_text(dir.path() / "list.txt", "./images/train/b.jpg\nimages/train/a.PNG\n\n");
  std::vector<std::string> from_folder = data::list_image_files({(images / "train").string()});
  REQUIRE(from_folder.size() == 3);
  CHECK(from_folder[0] == (images / "train" / "a.PNG").string());
  CHECK(from_folder[2] == (images / "train" / "sub" / "c.bmp").string());
  std::vector<std::string> from_list = data::list_image_files({(dir.path() / "list.txt").string()});
  CHECK(from_list == std::vector<std::string>{(images / "train" / "a.PNG").string(),
                                              (images / "train" / "b.jpg").string()});
  // A folder and a list naming the same files: each image once.
  CHECK(data::list_image_files({(images / "train").string(), (dir.path() / "list.txt").string()})
            .size() == 3);
  CHECK_THROWS_WITH_AS(data::list_image_files({(dir.path() / "missing").string()}),
                       doctest::Contains("does not exist"), std::runtime_error);
}

TEST_CASE("label path rule replaces the last images folder and the extension") {
  CHECK(data::label_path_for("/d/images/train/x.jpg") == "/d/labels/train/x.txt");
  CHECK(data::label_path_for("/images/d/images/v/x.y.png") == "/images/d/labels/v/x.y.txt");
  CHECK(data::label_path_for("/d/pics/x.jpg") == "/d/pics/x.txt");
}
