// tests/unit/loss_rows.cpp — a step's matched rows where the loss reads them
// (models/loss/loss_rows.h): the packed copy read back from its header alone holds every row,
// grouped by cell in build_targets' order; the buffer stays at one address while batches fit and
// moves (saying so) when one does not; and the loss refuses rows staged for another head.
#include "models/loss/loss_rows.h"

#include <doctest/doctest.h>

#include <bit>
#include <map>
#include <tuple>
#include <vector>

#include "models/loss/loss.h"
#include "tests/support/testing.h"
#include "tools/selftest/random_matched_rows.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::testing;

namespace {

// Two levels of a 3-class head of 2 images x 3 anchors.
std::vector<LevelCells> two_levels() {
  return {{.images = 2, .anchors = 3, .ny = 8, .nx = 8, .classes = 3},
          {.images = 2, .anchors = 3, .ny = 4, .nx = 4, .classes = 3}};
}

LevelTargets random_targets(Rng& rng, int rows_per_level) {
  LevelTargets targets;
  for (const LevelCells& l : two_levels())
    targets.push_back(
        selftest::random_matched_rows(rng, rows_per_level, l.images, l.anchors, l.ny, l.nx, 3));
  return targets;
}

}  // namespace

TEST_CASE("loss rows: the packed copy holds every row, grouped by cell in their order") {
  Rng rng(41);
  const LevelTargets targets = random_targets(rng, 40);
  LossRows staged(Device::cpu());
  staged.stage(targets, two_levels());
  // On the CPU the device copy is host memory: read it as a kernel would, from its header.
  const Rows rows = rows_in(staged.packed());
  REQUIRE(rows.count == 80);
  REQUIRE(rows.groups < rows.count);  // random_matched_rows puts some rows on one cell
  // Every level's rows, by cell, in their order within the cell: what the groups must hold.
  using Cell = std::tuple<int, int64_t>;  // level, cell index
  std::map<Cell, std::vector<const MatchedRow*>> by_cell;
  for (size_t level = 0; level < targets.size(); ++level)
    for (const MatchedRow& r : targets[level])
      by_cell[{int(level), two_levels()[level].cell_index(r.image, r.anchor, r.gj, r.gi)}]
          .push_back(&r);
  REQUIRE(int64_t(by_cell.size()) == rows.groups);
  int64_t group = 0;
  for (const auto& [cell, members] : by_cell) {  // (level, cell) order, as the packing sorts
    CAPTURE(group);
    REQUIRE(rows.first[group + 1] - rows.first[group] == int64_t(members.size()));
    for (size_t k = 0; k < members.size(); ++k) {
      const int r = rows.first[group] + int(k);
      const MatchedRow& want = *members[k];
      CHECK(rows.level[r] == std::get<0>(cell));
      CHECK(std::make_tuple(rows.image[r], rows.anchor[r], rows.gj[r], rows.gi[r],
                            rows.class_id[r]) ==
            std::make_tuple(want.image, want.anchor, want.gj, want.gi, want.class_id));
      CHECK(std::make_tuple(rows.tx[r], rows.ty[r], rows.tw[r], rows.th[r], rows.anchor_w[r],
                            rows.anchor_h[r]) ==
            std::make_tuple(want.tx, want.ty, want.tw, want.th, want.anchor_w, want.anchor_h));
    }
    ++group;
  }
  CHECK(rows.first[rows.groups] == rows.count);
  CHECK(staged.targets() == targets);  // the host loss's copy, as build_targets made it
}

TEST_CASE("loss rows: one address while the batches fit, a larger buffer when one does not") {
  Rng rng(42);
  LossRows staged(Device::cpu());
  CHECK(staged.stage(random_targets(rng, 30), two_levels()));  // the first: a new buffer
  const int64_t capacity = staged.capacity();
  const std::byte* first = staged.packed();
  CHECK(capacity >= 60);
  CHECK(std::has_single_bit(uint64_t(capacity)));
  for (int rows : {0, 5, int(capacity / 2)}) {  // fewer and more rows, no rows at all
    CAPTURE(rows);
    CHECK_FALSE(staged.stage(random_targets(rng, rows), two_levels()));
    CHECK(staged.packed() == first);
    CHECK(rows_in(staged.packed()).count == 2 * rows);
    CHECK(staged.count() == 2 * rows);
  }
  // More rows than it holds: it grows, to half as many again at least, at a new address.
  const int many = int(capacity);  // 2 x capacity rows over the two levels
  CHECK(staged.stage(random_targets(rng, many), two_levels()));
  CHECK(staged.capacity() >= 3 * many);
  CHECK(std::has_single_bit(uint64_t(staged.capacity())));
  CHECK(rows_in(staged.packed()).count == 2 * many);
}

// Ranks that record their steps stage with the capacity they agreed on (models/train/solver.cpp):
// every rank's buffer then has that size, whatever its own rows.
TEST_CASE("loss rows: an agreed capacity sizes the buffer, beyond what the rows need") {
  Rng rng(44);
  const LevelTargets few = random_targets(rng, 10);
  CHECK(LossRows::rows_of(few) == 20);
  CHECK(LossRows::capacity_for(20) == 256);
  CHECK(LossRows::capacity_for(1000) == 2048);
  LossRows staged(Device::cpu());
  CHECK(staged.stage(few, two_levels(), 4096));
  CHECK(staged.capacity() == 4096);
  const std::byte* first = staged.packed();
  CHECK_FALSE(staged.stage(random_targets(rng, 1000), two_levels(), 4096));  // 2000 rows fit
  CHECK(staged.packed() == first);
  CHECK(staged.stage(few, two_levels(), 8192));  // a peer needs more: it grows too
  CHECK(staged.capacity() == 8192);
  CHECK(rows_in(staged.packed()).count == 20);
}

TEST_CASE("loss rows: a row outside its head, and rows staged for another head, are refused") {
  Rng rng(43);
  LevelTargets targets = random_targets(rng, 10);
  targets[1].back().gj = 4;  // level 1 has 4 rows of cells
  LossRows staged(Device::cpu());
  CHECK_THROWS_WITH_AS(staged.stage(targets, two_levels()),
                       doctest::Contains("level 1 row 9 (image"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(head_cells({{2, 3 * 8 + 1, 8, 8}}, 3), doctest::Contains("= nc + 5"),
                       std::invalid_argument);

  // Staged for 2 images; the head has 3.
  targets[1].back().gj = 3;
  staged.stage(targets, two_levels());
  std::vector<std::vector<float>> head;
  std::vector<View<const float>> predictions;
  for (LevelCells l : two_levels()) {
    l.images = 3;
    head.push_back(random_vector<float>(rng, l.head_shape().numel(), -2, 2));
    predictions.push_back(dense_view<const float>(head.back().data(), l.head_shape()));
  }
  Tensor values = empty_loss(Device::cpu());
  const LossNormalization norm = local_normalization(targets, 3);
  LossOptions options;
  options.classes = 3;
  CHECK_THROWS_WITH_AS(
      yolo_loss<float>(predictions, staged, norm, options, {}, values.view<double>()),
      doctest::Contains("staged for another head"), std::invalid_argument);
}
