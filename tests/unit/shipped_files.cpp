// tests/unit/shipped_files.cpp — the shipped files (model yamls, the benches' Python peers) are
// found wherever a binary runs: BAREYOLO_HOME first, then beside the executable, then its parent
// (the checkout, for build/) and ../share/bareyolo; a model yaml named relatively is found from
// any folder.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/shipped_files.h"
#include "models/yolo/model_config.h"
#include "tests/support/testing.h"

using namespace bareyolo;
namespace fs = std::filesystem;

namespace {

// A folder of its own (removed at the end) and BAREYOLO_HOME restored.
struct HomeFolder {
  fs::path path = fs::temp_directory_path() / ("bareyolo-home-" + std::to_string(::getpid()));
  HomeFolder() { fs::create_directories(path / "models"); }
  ~HomeFolder() {
    ::unsetenv("BAREYOLO_HOME");
    fs::remove_all(path);
  }
};

}  // namespace

TEST_CASE("shipped_file: BAREYOLO_HOME wins, the checkout is the last resort") {
  HomeFolder home;
  const std::string shipped = shipped_file("models/yolov5n.yaml");  // from the checkout
  CHECK(fs::exists(shipped));
  std::ofstream(home.path / "models" / "yolov5n.yaml") << "nc: 1\n";
  ::setenv("BAREYOLO_HOME", home.path.c_str(), 1);
  CHECK(shipped_file("models/yolov5n.yaml") == (home.path / "models" / "yolov5n.yaml").string());
  // What BAREYOLO_HOME lacks still comes from further down the list.
  CHECK(shipped_file("models/yolov5-tiny.yaml") != (home.path / "models/yolov5-tiny.yaml"));
}

TEST_CASE("shipped_file: a file nobody has is an error naming where it looked") {
  HomeFolder home;
  ::setenv("BAREYOLO_HOME", home.path.c_str(), 1);
  CHECK_FALSE(find_shipped_file("models/nowhere.yaml"));
  try {
    shipped_file("models/nowhere.yaml");
    FAIL("no error");
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    CHECK(message.find((home.path / "models/nowhere.yaml").string()) != std::string::npos);
    CHECK(message.find("BAREYOLO_HOME") != std::string::npos);
  }
}

TEST_CASE("load_model_config: a relative yaml path that is not here is a shipped one") {
  const fs::path before = fs::current_path();
  fs::current_path(fs::temp_directory_path());
  const models::ModelConfig config = models::load_model_config("models/yolov5-tiny.yaml");
  CHECK_THROWS_WITH_AS(models::load_model_config("models/no-such-model.yaml"),
                       doctest::Contains("no-such-model.yaml"), std::invalid_argument);
  fs::current_path(before);
  CHECK_FALSE(config.rows.empty());
}
