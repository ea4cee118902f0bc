// tests/unit/checkpointer.cpp — which files the snapshot step (models/train/checkpointer.h)
// writes at which moment, with a snapshot that names the moment it was taken: --nosave writes
// nothing before the run ends, then last (the end's) and best (its own epoch's, held since).
#include "models/train/checkpointer.h"

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// A Checkpointer whose snapshots say the moment the test last set, and which records the
// names of the files it reports written.
struct Recorded {
  std::string moment;
  std::vector<std::string> saved;
  models::Checkpointer checkpointer;

  Recorded(const fs::path& run_dir, models::CheckpointPolicy policy)
      : checkpointer(
            run_dir.string(), policy, true,
            [this] {
              SafetensorsFile file;
              file.metadata()["moment"] = moment;
              return file;
            },
            [this](const std::string& path) {
              saved.push_back(fs::path(path).filename().string());
            }) {}

  std::string moment_in(const std::string& file) const {
    return SafetensorsFile::load(checkpointer.path(file)).metadata().at("moment");
  }
};

}  // namespace

TEST_CASE("--nosave writes nothing before the run ends, then last and the best epoch's") {
  TempDir dir;
  const models::CheckpointPolicy nosave{.nosave = true};
  {
    Recorded run(dir.path() / "to-the-end", nosave);
    run.moment = "epoch 0", run.checkpointer.after_epoch(0, true, false);
    run.moment = "epoch 1", run.checkpointer.after_epoch(1, false, false);
    CHECK(run.saved.empty());
    CHECK(fs::is_empty(dir.path() / "to-the-end" / "weights"));
    run.moment = "epoch 2", run.checkpointer.after_epoch(2, false, true);
    CHECK(run.saved == std::vector<std::string>{"last.safetensors", "best.safetensors"});
    CHECK(run.moment_in("last.safetensors") == "epoch 2");
    CHECK(run.moment_in("best.safetensors") == "epoch 0");
  }
  {
    Recorded run(dir.path() / "best-at-the-end", nosave);
    run.moment = "epoch 0", run.checkpointer.after_epoch(0, true, false);
    run.moment = "epoch 1", run.checkpointer.after_epoch(1, true, true);
    CHECK(run.saved == std::vector<std::string>{"last.safetensors", "best.safetensors"});
    CHECK(run.moment_in("best.safetensors") == "epoch 1");
  }
  {
    Recorded run(dir.path() / "max-steps", nosave);
    run.moment = "epoch 0", run.checkpointer.after_epoch(0, true, false);
    run.moment = "step 5", run.checkpointer.after_step(5, false);
    CHECK(run.saved.empty());
    run.moment = "step 6", run.checkpointer.after_step(6, true);  // --max-steps: the end
    CHECK(run.saved == std::vector<std::string>{"last.safetensors", "best.safetensors"});
    CHECK(run.moment_in("last.safetensors") == "step 6");
    CHECK(run.moment_in("best.safetensors") == "epoch 0");
  }
  {  // without --nosave: every epoch's last, and best when it is the best
    Recorded run(dir.path() / "saving", {});
    run.moment = "epoch 0", run.checkpointer.after_epoch(0, true, false);
    run.moment = "epoch 1", run.checkpointer.after_epoch(1, false, false);
    CHECK(run.saved ==
          std::vector<std::string>{"last.safetensors", "best.safetensors", "last.safetensors"});
    CHECK(run.moment_in("last.safetensors") == "epoch 1");
    CHECK(run.moment_in("best.safetensors") == "epoch 0");
  }
}
