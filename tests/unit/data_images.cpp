// tests/unit/data_images.cpp — image inputs that used to vanish or abort: symbolic links that
// lead nowhere, into a loop or at a FIFO.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "data/image_files.h"
#include "data/label_cache.h"
#include "data/verify.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

const data::Problem* find_problem(const std::vector<data::Problem>& problems,
                                  const fs::path& file) {
  auto found = std::find_if(problems.begin(), problems.end(),
                            [&](const data::Problem& p) { return p.file == file.string(); });
  return found == problems.end() ? nullptr : &*found;
}

}  // namespace

TEST_CASE("symbolic links: dead ends, loops and FIFOs are reported per file; the split goes on") {
  // Before: a dead link or a link to a FIFO vanished from the count, and a folder link back
  // up the tree aborted the listing with a raw filesystem error.
  TempDir dir;
  const fs::path root = dir.path(), images = root / "images" / "train";
  add_image(root, "train", "real", 32, 32, {{0, 0.5f, 0.5f, 0.2f, 0.2f}});
  add_image(root, "elsewhere", "target", 40, 40, {});
  fs::create_symlink(root / "images" / "elsewhere" / "target.png", images / "linked.png");
  write_text(root / "labels" / "train" / "linked.txt", "0 0.5 0.5 0.3 0.3\n");
  fs::create_symlink(root / "gone.png", images / "dead.png");
  fs::create_symlink(images / "loop.png", images / "loop.png");
  REQUIRE(::mkfifo((root / "fifo").c_str(), 0600) == 0);
  fs::create_symlink(root / "fifo", images / "fifo.png");
  fs::create_directories(images / "sub");
  fs::create_directory_symlink(images, images / "sub" / "up");  // a folder loop
  fs::remove(root / "labels" / "train" / "real.txt");
  fs::create_symlink(root / "gone.txt", root / "labels" / "train" / "real.txt");

  std::vector<data::Problem> listing;
  const std::vector<std::string> files = data::list_image_files({images.string()}, &listing);
  CHECK(files.size() == 5);  // real, linked, dead, loop, fifo: each once
  REQUIRE(listing.size() == 1);
  CHECK(listing[0].file == (images / "sub" / "up").string());
  CHECK(listing[0].message.starts_with("leads to a folder already searched"));

  const data::SplitReport report = data::verify_images(files, 1, 2);
  CHECK(report.summary() == "1 images, 0 backgrounds, 4 corrupt, 1 labels");  // linked is used
  const data::Problem* dead = find_problem(report.problems, images / "dead.png");
  REQUIRE(dead != nullptr);
  CHECK(dead->message == "unreadable image: it is a symbolic link to '" +
                             (root / "gone.png").string() + "', which does not exist");
  const data::Problem* loop = find_problem(report.problems, images / "loop.png");
  REQUIRE(loop != nullptr);
  CHECK(loop->message.find("in a loop of links") != std::string::npos);
  const data::Problem* fifo = find_problem(report.problems, images / "fifo.png");
  REQUIRE(fifo != nullptr);
  CHECK(fifo->message.find("it is a FIFO") != std::string::npos);
  // A label that is a dead link is not a missing label (a background): the image is skipped.
  const data::Problem* label =
      find_problem(report.problems, root / "labels" / "train" / "real.txt");
  REQUIRE(label != nullptr);
  CHECK(label->message.find("which does not exist") != std::string::npos);
  CHECK(label->image_skipped);

  // Through the cache, the folder loop's note reaches the report data-check prints.
  const data::CachedSplit split = data::load_or_build_split({images.string()}, 1);
  CHECK(find_problem(split.report.problems, images / "sub" / "up") != nullptr);
}
