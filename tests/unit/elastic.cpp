// tests/unit/elastic.cpp — where a restarted job continues (models/train/elastic.h): the run a
// torchrun job recorded, found again by its TORCHELASTIC_RUN_ID, and the request of a run
// without a checkpoint yet, which starts over in its own directory.
#include <chrono>
#include <thread>

#include "models/train/elastic.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("find_elastic_run: the run of this torchrun job, the newest when several recorded it") {
  TempDir dir;
  const fs::path project = dir.path() / "runs";
  CHECK_FALSE(models::find_elastic_run(project.string(), "job-a").has_value());  // no project
  for (const char* run : {"exp", "exp2", "exp3", "exp4"}) fs::create_directories(project / run);
  models::record_elastic_run((project / "exp").string(), "job-a");
  models::record_elastic_run((project / "exp2").string(), "job-b");
  CHECK(models::find_elastic_run(project.string(), "job-a") == (project / "exp").string());
  CHECK(models::find_elastic_run(project.string(), "job-b") == (project / "exp2").string());
  CHECK_FALSE(models::find_elastic_run(project.string(), "job-c").has_value());
  CHECK_FALSE(models::find_elastic_run(project.string(), "job").has_value());  // no prefix match
  // torchrun's default id "none" is shared: the most recently recorded run wins.
  models::record_elastic_run((project / "exp3").string(), "none");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  models::record_elastic_run((project / "exp4").string(), "none");
  CHECK(models::find_elastic_run(project.string(), "none") == (project / "exp4").string());
}

TEST_CASE("continue_run: without a checkpoint the run starts over in its own directory") {
  TempDir dir;
  models::TrainOptions request;
  request.run_dir = (dir.path() / "exp").string();
  request.epochs = 7;
  std::string position;
  const models::TrainOptions next = models::continue_run(request, &position);
  CHECK(next.resume.empty());
  CHECK(next.run_dir == request.run_dir);
  CHECK(next.epochs == 7);
  CHECK(position == "from the start: " + request.run_dir + " has no checkpoint yet");
}
