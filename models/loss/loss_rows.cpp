// models/loss/loss_rows.cpp — see loss_rows.h.
#include "models/loss/loss_rows.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include "kernels/op_sequence.h"
#include "kernels/staged_copies.h"

namespace bareyolo::models {

namespace {

// Refuses a row that does not index inside its level's head: rows come from build_targets, but
// the loss is public, and such a row would read and write outside the head's buffers.
void check_rows(const std::vector<MatchedRow>& rows, const LevelCells& l, size_t level) {
  for (size_t k = 0; k < rows.size(); ++k) {
    const MatchedRow& r = rows[k];
    auto outside = [](int64_t value, int64_t count) { return value < 0 || value >= count; };
    if (outside(r.image, l.images) || outside(r.anchor, l.anchors) || outside(r.gj, l.ny) ||
        outside(r.gi, l.nx) || outside(r.class_id, l.classes))
      throw std::invalid_argument(
          "yolo_loss: level " + std::to_string(level) + " row " + std::to_string(k) + " (image " +
          std::to_string(r.image) + ", anchor " + std::to_string(r.anchor) + ", cell " +
          std::to_string(r.gj) + "," + std::to_string(r.gi) + ", class " +
          std::to_string(r.class_id) + ") is outside the head's " + std::to_string(l.images) +
          " images x " + std::to_string(l.anchors) + " anchors x " + std::to_string(l.ny) + "x" +
          std::to_string(l.nx) + " cells x " + std::to_string(l.classes) + " classes");
  }
}

}  // namespace

std::vector<LevelCells> head_cells(const std::vector<Shape4>& head, int classes) {
  const int outputs = classes + 5;
  std::vector<LevelCells> cells;
  for (size_t level = 0; level < head.size(); ++level) {
    const Shape4& shape = head[level];
    if (shape.c % outputs != 0)
      throw std::invalid_argument("yolo_loss: level " + std::to_string(level) + " has " +
                                  std::to_string(shape.c) + " channels, not a multiple of " +
                                  std::to_string(outputs) + " = nc + 5");
    cells.push_back({.images = int(shape.n),
                     .anchors = int(shape.c / outputs),
                     .ny = int(shape.h),
                     .nx = int(shape.w),
                     .classes = classes});
  }
  return cells;
}

PackedRows::PackedRows(const LevelTargets& targets, const std::vector<LevelCells>& cells) {
  if (targets.size() != cells.size())
    throw std::invalid_argument("yolo_loss: rows of " + std::to_string(targets.size()) +
                                " levels for a head of " + std::to_string(cells.size()));
  // (level, row) in (level, cell) order, stably, and where each group starts.
  std::vector<std::pair<int, const MatchedRow*>> sorted;
  std::vector<int64_t> group_first;
  for (size_t level = 0; level < targets.size(); ++level) {
    const LevelCells& l = cells[level];
    check_rows(targets[level], l, level);
    std::vector<const MatchedRow*> rows;
    for (const MatchedRow& r : targets[level]) rows.push_back(&r);
    auto cell = [&](const MatchedRow* r) {
      return l.cell_index(r->image, r->anchor, r->gj, r->gi);
    };
    std::stable_sort(rows.begin(), rows.end(),
                     [&](const MatchedRow* a, const MatchedRow* b) { return cell(a) < cell(b); });
    for (size_t k = 0; k < rows.size(); ++k) {
      if (k == 0 || cell(rows[k]) != cell(rows[k - 1]))
        group_first.push_back(int64_t(sorted.size()));
      sorted.emplace_back(int(level), rows[k]);
    }
  }
  count_ = int64_t(sorted.size());
  if (count_ > int64_t(std::numeric_limits<int>::max()))
    throw std::invalid_argument("yolo_loss: " + std::to_string(count_) +
                                " matched rows; at most 2^31 - 1 per call (use a smaller batch)");
  groups_ = int64_t(group_first.size());
  group_first.push_back(count_);

  const RowLayout layout = row_layout(count_, groups_);
  bytes_.assign(layout.bytes, std::byte{0});
  const int64_t header[2] = {count_, groups_};
  std::memcpy(bytes_.data(), header, sizeof header);
  auto doubles = [&](int array, auto field) {
    double* out = reinterpret_cast<double*>(bytes_.data() + layout.offsets[array]);
    for (const auto& [level, r] : sorted) *out++ = field(*r);
  };
  auto ints = [&](int array, auto field) {
    int* out = reinterpret_cast<int*>(bytes_.data() + layout.offsets[array]);
    for (const auto& [level, r] : sorted) *out++ = field(level, *r);
  };
  doubles(0, [](const MatchedRow& r) { return r.tx; });
  doubles(1, [](const MatchedRow& r) { return r.ty; });
  doubles(2, [](const MatchedRow& r) { return r.tw; });
  doubles(3, [](const MatchedRow& r) { return r.th; });
  doubles(4, [](const MatchedRow& r) { return r.anchor_w; });
  doubles(5, [](const MatchedRow& r) { return r.anchor_h; });
  ints(6, [](int level, const MatchedRow&) { return level; });
  ints(7, [](int, const MatchedRow& r) { return r.image; });
  ints(8, [](int, const MatchedRow& r) { return r.anchor; });
  ints(9, [](int, const MatchedRow& r) { return r.gj; });
  ints(10, [](int, const MatchedRow& r) { return r.gi; });
  ints(11, [](int, const MatchedRow& r) { return r.class_id; });
  int* first = reinterpret_cast<int*>(bytes_.data() + layout.offsets[kRowArrays - 1]);
  for (int64_t g : group_first) *first++ = int(g);
}

int64_t LossRows::rows_of(const LevelTargets& targets) {
  int64_t rows = 0;
  for (const std::vector<MatchedRow>& level : targets) rows += int64_t(level.size());
  return rows;
}

int64_t LossRows::capacity_for(int64_t rows) {
  return std::max<int64_t>(256, int64_t(std::bit_ceil(uint64_t(rows) * 3 / 2)));
}

bool LossRows::stage(LevelTargets targets, std::vector<LevelCells> cells, int64_t at_least) {
  const PackedRows packed(targets, cells);
  return stage(std::move(targets), std::move(cells), packed, at_least);
}

bool LossRows::stage(LevelTargets targets, std::vector<LevelCells> cells, const PackedRows& packed,
                     int64_t at_least) {
  const bool moved = !buffer_.defined() || packed.count() > capacity_ || at_least > capacity_;
  if (moved) {
    capacity_ = std::max(capacity_for(packed.count()), at_least);
    buffer_ = Tensor::empty({1, 1, 1, int64_t(row_layout(capacity_, capacity_).bytes)}, device_,
                            DType::u8);
  }
  upload_without_waiting(buffer_.view<uint8_t>().data, device_, packed.bytes().data(),
                         packed.bytes().size());
  targets_ = std::move(targets);
  cells_ = std::move(cells);
  count_ = packed.count();
  return moved;
}

const std::byte* LossRows::packed() const {
  if (!buffer_.defined()) throw std::logic_error("LossRows: nothing staged yet");
  return reinterpret_cast<const std::byte*>(buffer_.view<uint8_t>().data);
}

std::string describe_argument(const LossRows& rows) {
  return "rows at " + op_sequence::describe(rows.packed()) + " capacity " +
         std::to_string(rows.capacity());
}

}  // namespace bareyolo::models
