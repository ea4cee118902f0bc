// tests/unit/image_cache.cpp — the decoded-image cache: batches bit-identical with and without
// it (also once the image files are gone), caches of another image size, dataset or format
// version, of images rewritten since, and truncated or corrupt ones rebuilt with a note, a ram
// cache too big for its folder falling back to disk, and the ram cache's life: removed after its
// last user, a stale one (no cleaner) replaced.
#include <stb/stb_image_write.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "data/dataset.h"
#include "data/image_cache.h"
#include "data/loader.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

constexpr int kImgsz = 96;

std::vector<data::Batch> load_epoch(const data::Dataset& dataset) {
  data::SamplerOptions sampler;
  sampler.dataset_size = dataset.size();
  sampler.global_batch = 4;
  data::LoaderOptions options;
  options.imgsz = kImgsz;
  options.workers = 2;
  data::Loader loader(dataset, data::DistributedSampler(sampler).plan_epoch(1, kImgsz), 1, options);
  std::vector<data::Batch> batches;
  while (std::optional<data::Batch> batch = loader.next()) batches.push_back(std::move(*batch));
  return batches;
}

bool same_batches(const std::vector<data::Batch>& a, const std::vector<data::Batch>& b) {
  if (a.size() != b.size()) return false;
  for (size_t s = 0; s < a.size(); ++s)
    if (a[s].targets != b[s].targets ||
        std::memcmp(a[s].image(0), b[s].image(0), a[s].image_bytes() * size_t(a[s].size)) != 0)
      return false;
  return true;
}

bool mentions(const std::vector<std::string>& notes, const std::string& text) {
  for (const std::string& note : notes)
    if (note.find(text) != std::string::npos) return true;
  return false;
}

// Every image the cache serves equals a fresh decode.
bool serves_decoded_images(const data::ImageCache& cache, const data::Dataset& dataset) {
  for (int64_t i = 0; i < dataset.size(); ++i) {
    const data::LoadedImage cached = cache.load(i);
    const data::LoadedImage decoded = data::load_resized(dataset.record(i).path, cache.imgsz());
    if (cached.image.pixels != decoded.image.pixels ||
        cached.original_width != decoded.original_width)
      return false;
  }
  return true;
}

bool removed_within(const fs::path& file, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (fs::exists(file) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return !fs::exists(file);
}

struct Fixture {
  TempDir dir;
  bool shm_made = fs::create_directories(dir.path() / "shm");  // the ram folder
  data::OpenedSplit train =
      data::open_split(data::read_dataset_yaml(make_box_dataset(dir.path(), 9)), "train");
  data::ImageCacheRequest request(data::CacheMode mode) const {
    return {.mode = mode,
            .imgsz = kImgsz,
            .label_cache_file = train.verification.cache_file,
            .ram_folder = (dir.path() / "shm").string()};
  }
};

}  // namespace

TEST_CASE("image cache: batches are bit-identical with and without it") {
  Fixture f;
  const std::vector<data::Batch> decoded = load_epoch(f.train.dataset);
  std::vector<std::string> notes;
  f.train.dataset.use_cache(
      data::open_image_cache(f.train.dataset.records(), f.request(data::CacheMode::disk), notes));
  REQUIRE(f.train.dataset.cache() != nullptr);
  CHECK(mentions(notes, "caching 9 images"));
  CHECK(f.train.dataset.cache()->file() ==
        data::disk_cache_file(f.train.dataset.records(), f.request(data::CacheMode::disk)));
  for (const data::ImageRecord& record : f.train.dataset.records()) fs::remove(record.path);
  CHECK(same_batches(load_epoch(f.train.dataset), decoded));  // read from the cache alone
}

TEST_CASE("image cache: another image size, dataset or format version is rebuilt") {
  Fixture f;
  const std::string file = (f.dir.path() / "split.cache").string();
  const auto& records = f.train.dataset.records();
  std::vector<std::string> notes;
  REQUIRE(data::open_cache_file(file, records, {.imgsz = 64}, notes));

  notes.clear();
  auto cache = data::open_cache_file(file, records, {.imgsz = kImgsz}, notes);
  CHECK(mentions(notes, "made for image size 64, this run uses 96; rebuilding it"));
  REQUIRE(cache);
  CHECK(serves_decoded_images(*cache, f.train.dataset));

  notes.clear();
  const std::vector<data::ImageRecord> fewer(records.begin(), records.end() - 1);
  CHECK(data::open_cache_file(file, fewer, {.imgsz = kImgsz}, notes));
  CHECK(mentions(notes, "made for another dataset"));

  std::fstream patch(file, std::ios::in | std::ios::out | std::ios::binary);
  patch.seekp(8);  // the format version follows the 8-byte magic
  patch.put(char(99));
  patch.close();
  notes.clear();
  CHECK(data::open_cache_file(file, fewer, {.imgsz = kImgsz}, notes));
  CHECK(mentions(notes, "format version 99"));

  notes.clear();
  CHECK(data::open_cache_file(file, fewer, {.imgsz = kImgsz}, notes));
  CHECK(notes.empty());  // current now: read, not rebuilt
}

TEST_CASE("image cache: an image rewritten in place with the same file size is rebuilt") {
  // BMP files of one size have one byte count whatever their pixels: only the modification
  // time tells the new image from the old.
  TempDir dir;
  const std::string image = (dir.path() / "a.bmp").string(),
                    file = (dir.path() / "c.cache").string();
  auto write_grey = [&](uint8_t level) {
    const data::Image grey(32, 24, level);
    REQUIRE(stbi_write_bmp(image.c_str(), 32, 24, 3, grey.pixels.data()) != 0);
  };
  const std::vector<data::ImageRecord> records = {
      {.path = image, .width = 32, .height = 24, .boxes = {}}};
  std::vector<std::string> notes;
  write_grey(50);
  auto first = data::open_cache_file(file, records, {.imgsz = 32}, notes);
  REQUIRE(first);
  CHECK(first->load(0).image.pixels[0] == 50);
  const uintmax_t bytes = fs::file_size(image);
  std::this_thread::sleep_for(std::chrono::milliseconds(25));  // past the clock tick of mtimes
  write_grey(200);
  REQUIRE(fs::file_size(image) == bytes);
  notes.clear();
  auto second = data::open_cache_file(file, records, {.imgsz = 32}, notes);
  CHECK(mentions(notes, "made for another dataset (or its images changed since)"));
  REQUIRE(second);
  CHECK(second->load(0).image.pixels[0] == 200);
}

TEST_CASE("image cache: a truncated or corrupt file is detected and rebuilt") {
  Fixture f;
  const std::string file = (f.dir.path() / "split.cache").string();
  std::vector<std::string> notes;
  REQUIRE(data::open_cache_file(file, f.train.dataset.records(), {.imgsz = kImgsz}, notes));
  fs::resize_file(file, fs::file_size(file) - 100);
  notes.clear();
  auto cache = data::open_cache_file(file, f.train.dataset.records(), {.imgsz = kImgsz}, notes);
  CHECK(mentions(notes, "truncated"));
  REQUIRE(cache);
  CHECK(serves_decoded_images(*cache, f.train.dataset));
  cache.reset();

  std::fstream damage(file, std::ios::in | std::ios::out | std::ios::binary);
  damage.seekp(64 + 32 * 3 + 8);  // image 3's width in the index
  damage.put(char(1));
  damage.close();
  notes.clear();
  cache = data::open_cache_file(file, f.train.dataset.records(), {.imgsz = kImgsz}, notes);
  CHECK(mentions(notes, "corrupt (its checksum does not match); rebuilding it"));
  REQUIRE(cache);
  CHECK(serves_decoded_images(*cache, f.train.dataset));
}

TEST_CASE("image cache: a ram cache bigger than the folder's room falls back to disk") {
  Fixture f;
  data::ImageCacheRequest request = f.request(data::CacheMode::ram);
  request.ram_limit_bytes = 1000;  // a small /dev/shm
  std::vector<std::string> notes;
  auto cache = data::open_image_cache(f.train.dataset.records(), request, notes);
  REQUIRE(cache);
  CHECK(mentions(notes, "more than the 1 MB free in " + request.ram_folder));
  CHECK(mentions(notes, "--cache ram does not fit, using --cache disk instead"));
  CHECK(cache->file() == data::disk_cache_file(f.train.dataset.records(), request));
  CHECK_FALSE(fs::exists(data::ram_cache_file(f.train.dataset.records(), request)));
}

TEST_CASE("image cache: the ram cache is removed after its last user, a stale one replaced") {
  Fixture f;
  const data::ImageCacheRequest request = f.request(data::CacheMode::ram);
  const std::string ram_file = data::ram_cache_file(f.train.dataset.records(), request);
  std::vector<std::string> notes;
  auto first = data::open_image_cache(f.train.dataset.records(), request, notes);
  auto second = data::open_image_cache(f.train.dataset.records(), request, notes);
  REQUIRE(first);
  CHECK(first->file() == ram_file);
  CHECK(second->file() == ram_file);
  first.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(fs::exists(ram_file));  // still in use
  second.reset();
  CHECK(removed_within(ram_file, std::chrono::seconds(5)));
  CHECK(removed_within(ram_file + ".cleaner", std::chrono::seconds(1)));

  // A ram cache with no cleaner, as a job killed together with its cleaner leaves it.
  REQUIRE(data::open_cache_file(ram_file, f.train.dataset.records(), {.imgsz = kImgsz}, notes));
  notes.clear();
  auto replaced = data::open_image_cache(f.train.dataset.records(), request, notes);
  CHECK(mentions(notes, "was left by a job that ended without removing it; replacing it"));
  REQUIRE(replaced);
  CHECK(serves_decoded_images(*replaced, f.train.dataset));
  replaced.reset();
  CHECK(removed_within(ram_file + ".cleaner", std::chrono::seconds(5)));  // no cleaner left
}
