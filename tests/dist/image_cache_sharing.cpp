// tests/dist/image_cache_sharing.cpp — `--cache ram` across ranks (models/train/image_caches.h):
// 2 forked ranks map one file, built once by rank 0 (the others read it, no note), and the
// ram cache is gone once both ranks are SIGKILLed — its cleaner outlives the job.
#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <stdexcept>
#include <thread>

#include "data/dataset.h"
#include "models/train/image_caches.h"
#include "tests/support/data_fixtures.h"
#include "tests/support/dist_testing.h"

using namespace bareyolo;
using bareyolo::dist::testing::run_ranks;

TEST_CASE("image cache: 2 ranks map one ram cache file, removed after both are SIGKILLed") {
  bareyolo::testing::TempDir dir;
  const std::string yaml = bareyolo::testing::make_box_dataset(dir.path(), 6);
  const std::filesystem::path shm = dir.path() / "shm";
  std::filesystem::create_directories(shm);
  data::open_split(data::read_dataset_yaml(yaml), "train");  // the label cache, once

  auto results = run_ranks(2, [&](dist::ProcessGroup& group) {
    data::OpenedSplit train = data::open_split(data::read_dataset_yaml(yaml), "train");
    std::vector<std::string> notes;
    const data::ImageCacheRequest request{.mode = data::CacheMode::ram,
                                          .imgsz = 64,
                                          .label_cache_file = train.verification.cache_file,
                                          .ram_folder = shm.string()};
    models::use_image_caches(request, {&train}, group.rank(), group.comm.get(),
                             [&](const std::string& note) { notes.push_back(note); });
    const data::ImageCache* cache = train.dataset.cache();
    if (!cache || cache->file().rfind(shm.string(), 0) != 0)
      throw std::runtime_error("no ram cache in " + shm.string());
    struct stat info;
    if (::stat(cache->file().c_str(), &info) != 0) throw std::runtime_error("cache file missing");
    double inodes[2] = {0, 0};
    inodes[group.rank()] = double(info.st_ino);
    group.comm->allreduce(dist::CommBuffer::of(inodes, 2), dist::ReduceOp::sum)->wait();
    if (inodes[0] != inodes[1]) throw std::runtime_error("the ranks map different files");
    const bool built_here = !notes.empty();
    if (built_here != (group.rank() == 0))
      throw std::runtime_error("rank " + std::to_string(group.rank()) +
                               (built_here ? " built the cache" : " did not report the build"));
    std::printf("cache %s\n", cache->file().c_str());
    std::fflush(stdout);
    group.comm->barrier()->wait();
    std::raise(SIGKILL);
  });
  REQUIRE(results.size() == 2);
  for (const auto& result : results) CHECK(result.signal == SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto leftovers = [&] { return !std::filesystem::is_empty(shm); };
  while (leftovers() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(leftovers());  // cache, lock and cleaner files all removed
}
