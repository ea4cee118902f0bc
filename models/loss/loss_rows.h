// models/loss/loss_rows.h — a batch's matched rows where the loss reads them: packed on the host
// and copied, before the step, into a buffer of the head's device that stays at one address.
//
// Why: the rows change from batch to batch (how many, which cells), so a loss that took them as
// launch arguments, sized its launches by their count or allocated for them would make every
// step's kernels different, and a CUDA graph of one step (kernels/step_graph.h) wrong for the
// next. Here the rows and their count are data in device memory: the GPU loss's launches are
// sized by the buffer's capacity and its threads read the count (rows_in), so one recording of
// the loss serves every batch that fits. A batch that does not fit grows the buffer (a new
// address: stage() says so, and the Solver records its step again); the capacity at least
// doubles, so that happens a few times in a run at most.
//
// Layout (one copy): a header of two int64 (rows, groups), then, each at an 8-byte boundary, the
// rows' tx, ty, tw, th, anchor_w, anchor_h (double), their level, image, anchor, gj, gi, class
// (int), and the groups' first rows (int, groups + 1). Rows are sorted stably by (level, cell):
// the rows of one cell form a group, in build_targets' order. The offsets follow from the two
// counts (row_layout), so the copy holds only what is used, and a reader finds the arrays from
// the header alone.
//
// The host's loss (the CPU's, in double for the checks) reads the rows as build_targets made
// them (targets()), in that order: its sums are the reference and do not change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "models/loss/loss_targets.h"

namespace bareyolo::models {

using LevelTargets = std::vector<std::vector<MatchedRow>>;  // per level, the matched rows

// The cells of one level's head, images x anchors x ny x nx, and its classes: what a matched row
// must index inside.
struct LevelCells {
  int images = 0, anchors = 0, ny = 0, nx = 0, classes = 0;
  bool operator==(const LevelCells&) const = default;
  // The shape of the level's head output: channel a x (classes + 5) + k of anchor a.
  Shape4 head_shape() const { return {images, int64_t(anchors) * (classes + 5), ny, nx}; }
  BAREYOLO_HOST_DEVICE int64_t cell_index(int image, int anchor, int gj, int gi) const {
    return ((int64_t(image) * anchors + anchor) * ny + gj) * nx + gi;
  }
  BAREYOLO_HOST_DEVICE int64_t count() const { return int64_t(images) * anchors * ny * nx; }
};

// The cells of head outputs of these shapes (channels = anchors x (classes + 5)); refuses a
// shape whose channels are not whole anchors.
std::vector<LevelCells> head_cells(const std::vector<Shape4>& head, int classes);

// The matched rows in device memory: row r of group g is in [first[g], first[g + 1]).
struct Rows {
  const double *tx, *ty, *tw, *th, *anchor_w, *anchor_h;
  const int *level, *image, *anchor, *gj, *gi, *class_id;
  const int* first;
  int64_t count = 0, groups = 0;
};

inline constexpr int kRowArrays = 13;  // 6 double, 6 int, then the groups' first rows

// Where each array starts for `count` rows in `groups` groups, and the bytes of the whole.
struct RowLayout {
  size_t offsets[kRowArrays];
  size_t bytes;
};

BAREYOLO_HOST_DEVICE inline RowLayout row_layout(int64_t count, int64_t groups) {
  RowLayout layout{};
  size_t at = 2 * sizeof(int64_t);  // the header
  for (int array = 0; array < kRowArrays; ++array) {
    layout.offsets[array] = at;
    const size_t elements = size_t(array == kRowArrays - 1 ? groups + 1 : count);
    at += (elements * (array < 6 ? sizeof(double) : sizeof(int)) + 7) / 8 * 8;
  }
  layout.bytes = at;
  return layout;
}

// The rows of a packed copy that starts at `base`, found from its header.
BAREYOLO_HOST_DEVICE inline Rows rows_in(const std::byte* base) {
  Rows rows;
  rows.count = reinterpret_cast<const int64_t*>(base)[0];
  rows.groups = reinterpret_cast<const int64_t*>(base)[1];
  const RowLayout layout = row_layout(rows.count, rows.groups);
  const double* doubles[6];
  const int* ints[7];
  for (int array = 0; array < 6; ++array)
    doubles[array] = reinterpret_cast<const double*>(base + layout.offsets[array]);
  for (int array = 6; array < kRowArrays; ++array)
    ints[array - 6] = reinterpret_cast<const int*>(base + layout.offsets[array]);
  rows.tx = doubles[0], rows.ty = doubles[1], rows.tw = doubles[2], rows.th = doubles[3];
  rows.anchor_w = doubles[4], rows.anchor_h = doubles[5];
  rows.level = ints[0], rows.image = ints[1], rows.anchor = ints[2];
  rows.gj = ints[3], rows.gi = ints[4], rows.class_id = ints[5], rows.first = ints[6];
  return rows;
}

// The host side: `targets` checked against `cells` (a row outside its level's head is refused,
// naming it) and packed as above into bytes(), to be copied as they are.
class PackedRows {
 public:
  PackedRows(const LevelTargets& targets, const std::vector<LevelCells>& cells);
  int64_t count() const { return count_; }
  int64_t groups() const { return groups_; }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  int64_t count_ = 0, groups_ = 0;
  std::vector<std::byte> bytes_;
};

// The loss's rows of one step after another, on one device (see the file comment).
class LossRows {
 public:
  explicit LossRows(const Device& device) : device_(device) {}

  // Packs `targets`, matched to heads of `cells`, and copies them to the device without the host
  // waiting, into a buffer that holds at least `at_least` rows (ranks that record their steps
  // keep buffers of one size: models/train/solver.cpp). Returns true when the buffer moved (it
  // grew, or this is the first call): what was recorded reading the old one is stale.
  bool stage(LevelTargets targets, std::vector<LevelCells> cells, int64_t at_least = 0);
  // The same with the rows packed already (`packed`: PackedRows(targets, cells)).
  bool stage(LevelTargets targets, std::vector<LevelCells> cells, const PackedRows& packed,
             int64_t at_least);

  // The rows of `targets`, every level's.
  static int64_t rows_of(const LevelTargets& targets);
  // The capacity a buffer gets for `rows` rows: room for half as many again (a run's batches
  // vary around a mean), a power of two, at least 256.
  static int64_t capacity_for(int64_t rows);

  const Device& device() const { return device_; }
  // As build_targets made them, per level: the host loss reads these.
  const LevelTargets& targets() const { return targets_; }
  const std::vector<LevelCells>& cells() const { return cells_; }
  int64_t count() const { return count_; }        // the rows staged last
  int64_t capacity() const { return capacity_; }  // the rows (and groups) the buffer holds
  // The packed copy on the device (rows_in reads it there).
  const std::byte* packed() const;

 private:
  Device device_;
  LevelTargets targets_;
  std::vector<LevelCells> cells_;
  int64_t count_ = 0, capacity_ = 0;
  Tensor buffer_;  // u8, row_layout(capacity, capacity).bytes on device_
};

// What the op sequence (kernels/op_sequence.h) records of a LossRows: where the rows are and how
// many fit, not the rows (a recording of the loss reads whatever the buffer holds).
std::string describe_argument(const LossRows& rows);

}  // namespace bareyolo::models
