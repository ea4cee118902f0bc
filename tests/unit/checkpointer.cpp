// tests/unit/checkpointer.cpp — which files the snapshot step (models/train/checkpointer.h)
// writes at which moment, with a snapshot that names the moment it was taken: --nosave writes
// nothing before the run ends, then last (the end's) and best (its own epoch's, held since).
// The files are written on a background thread: each is its moment's snapshot byte for byte,
// `saved` reports them in order on the calling thread, a failed write is rethrown there naming
// its file with the checkpoint before it intact, and nothing asked for is lost at the end.
#include "models/train/checkpointer.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A Checkpointer whose snapshots say the moment the test last set (in their metadata and in a
// tensor of values of its own, a few hundred KB so that writing takes a while), which keeps
// each moment's serialisation, and records the names of the files it reports written and the
// threads that reported them.
struct Recorded {
  std::string moment;
  std::map<std::string, std::vector<uint8_t>> serialized;  // by moment
  std::vector<std::string> saved;
  std::vector<std::thread::id> saved_on;
  models::Checkpointer checkpointer;

  Recorded(const fs::path& run_dir, models::CheckpointPolicy policy)
      : checkpointer(
            run_dir.string(), policy, true,
            [this] {
              SafetensorsFile file;
              file.metadata()["moment"] = moment;
              std::vector<float> values(100000);
              for (size_t i = 0; i < values.size(); ++i)
                values[i] = float(i) + float(std::hash<std::string>{}(moment) % 1000);
              file.add_values("values", values, {int64_t(values.size())});
              serialized[moment] = file.serialize();
              return file;
            },
            [this](const std::string& path) {
              saved.push_back(fs::path(path).filename().string());
              saved_on.push_back(std::this_thread::get_id());
            }) {}

  std::string moment_in(const std::string& file) const {
    return SafetensorsFile::load(checkpointer.path(file)).metadata().at("moment");
  }
  // Whether `file` holds `of_moment`'s snapshot, byte for byte.
  bool holds(const std::string& file, const std::string& of_moment) const {
    return file_bytes(checkpointer.path(file)) == serialized.at(of_moment);
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
    run.checkpointer.wait();
    CHECK(run.saved.empty());
    CHECK(fs::is_empty(dir.path() / "to-the-end" / "weights"));
    run.moment = "epoch 2", run.checkpointer.after_epoch(2, false, true);
    run.checkpointer.wait();
    CHECK(run.saved == std::vector<std::string>{"last.safetensors", "best.safetensors"});
    CHECK(run.moment_in("last.safetensors") == "epoch 2");
    CHECK(run.moment_in("best.safetensors") == "epoch 0");
  }
  {
    Recorded run(dir.path() / "best-at-the-end", nosave);
    run.moment = "epoch 0", run.checkpointer.after_epoch(0, true, false);
    run.moment = "epoch 1", run.checkpointer.after_epoch(1, true, true);
    run.checkpointer.wait();
    CHECK(run.saved == std::vector<std::string>{"last.safetensors", "best.safetensors"});
    CHECK(run.moment_in("best.safetensors") == "epoch 1");
  }
  {
    Recorded run(dir.path() / "max-steps", nosave);
    run.moment = "epoch 0", run.checkpointer.after_epoch(0, true, false);
    run.moment = "step 5", run.checkpointer.after_step(5, false);
    run.checkpointer.wait();
    CHECK(run.saved.empty());
    run.moment = "step 6", run.checkpointer.after_step(6, true);  // --max-steps: the end
    run.checkpointer.wait();
    CHECK(run.saved == std::vector<std::string>{"last.safetensors", "best.safetensors"});
    CHECK(run.moment_in("last.safetensors") == "step 6");
    CHECK(run.moment_in("best.safetensors") == "epoch 0");
  }
  {  // without --nosave: every epoch's last, and best when it is the best
    Recorded run(dir.path() / "saving", {});
    run.moment = "epoch 0", run.checkpointer.after_epoch(0, true, false);
    run.moment = "epoch 1", run.checkpointer.after_epoch(1, false, false);
    run.checkpointer.wait();
    CHECK(run.saved ==
          std::vector<std::string>{"last.safetensors", "best.safetensors", "last.safetensors"});
    CHECK(run.moment_in("last.safetensors") == "epoch 1");
    CHECK(run.moment_in("best.safetensors") == "epoch 0");
  }
}

TEST_CASE("checkpoints written in the background are their snapshots, reported in order") {
  TempDir dir;
  Recorded run(dir.path(), {.save_steps = 1});
  // Saves faster than the writer: later ones wait for room (background_writer.h).
  for (int step = 1; step <= 4; ++step) {
    run.moment = "step " + std::to_string(step);
    run.checkpointer.after_step(step, false);
  }
  run.moment = "epoch 0", run.checkpointer.after_epoch(0, true, false);
  run.checkpointer.wait();

  const std::vector<std::string> expected = {
      "step1.safetensors", "last.safetensors", "step2.safetensors", "last.safetensors",
      "step3.safetensors", "last.safetensors", "step4.safetensors", "last.safetensors",
      "last.safetensors",  "best.safetensors"};
  CHECK(run.saved == expected);
  for (const std::thread::id& thread : run.saved_on) CHECK(thread == std::this_thread::get_id());
  for (int step = 1; step <= 4; ++step)
    CHECK_MESSAGE(
        run.holds("step" + std::to_string(step) + ".safetensors", "step " + std::to_string(step)),
        "step " << step);
  CHECK(run.holds("last.safetensors", "epoch 0"));
  CHECK(run.holds("best.safetensors", "epoch 0"));
  CHECK_FALSE(run.holds("last.safetensors", "step 4"));  // the comparison can tell them apart
}

TEST_CASE("a failed checkpoint write is rethrown on the caller, the one before it intact") {
  TempDir dir;
  Recorded run(dir.path(), {.save_steps = 1});
  run.moment = "step 1", run.checkpointer.after_step(1, false);
  run.checkpointer.wait();
  REQUIRE(run.saved == std::vector<std::string>{"step1.safetensors", "last.safetensors"});

  // A non-empty folder where step 2's file goes: the rename onto it fails, root or not.
  const std::string blocked = run.checkpointer.path("step2.safetensors");
  const std::string names_it = "cannot save '" + blocked + "'";
  write_text(fs::path(blocked) / "in the way", "x");
  run.moment = "step 2", run.checkpointer.after_step(2, false);
  CHECK_THROWS_WITH_AS(run.checkpointer.wait(), doctest::Contains(names_it.c_str()),
                       std::runtime_error);
  CHECK(run.holds("last.safetensors", "step 1"));  // step 2's last came after the failure
  CHECK(run.saved.size() == 2);

  // The failure stays: every later call rethrows it, before asking for anything.
  run.moment = "step 3";
  CHECK_THROWS_WITH_AS(run.checkpointer.after_step(3, false), doctest::Contains(names_it.c_str()),
                       std::runtime_error);
  CHECK_THROWS_AS(run.checkpointer.wait(), std::runtime_error);
  CHECK_FALSE(fs::exists(run.checkpointer.path("step3.safetensors")));
  CHECK(run.saved.size() == 2);
}

TEST_CASE("a Checkpointer destroyed before its writes are done finishes them") {
  TempDir dir;
  std::vector<uint8_t> epoch_1;
  {
    Recorded run(dir.path(), {});
    run.moment = "epoch 0", run.checkpointer.after_epoch(0, true, false);
    run.moment = "epoch 1", run.checkpointer.after_epoch(1, false, false);
    epoch_1 = run.serialized.at("epoch 1");
  }
  CHECK(file_bytes((dir.path() / "weights" / "last.safetensors").string()) == epoch_1);
}
