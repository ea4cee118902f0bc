// models/loss/loss_targets.h — YOLOv5's build_targets: which prediction cells answer for which
// label. It depends only on the labels, the grid sizes and the anchors, never on the
// predictions, so the number of matched rows per level is known before the forward pass —
// the trainer all-reduces those counts and normalises the loss by the global ones.
//
// Per level, a label (cx, cy, w, h in grid cells) matches anchor a when
// max(w / aw, aw / w, h / ah, ah / h) < anchor_t. Each match yields its own cell plus the
// nearer horizontal and vertical neighbour cells (when those exist), so a box centred near a
// cell edge is also predicted from the next cell: offsets (0,0), then (+0.5,0) "left" if
// frac(gx) < 0.5 and gx > 1, (0,+0.5) "up", (-0.5,0) "right", (0,-0.5) "down" likewise
// measured from the far edges. Rows are ordered as YOLOv5 orders them: all centre rows,
// then left, up, right, down; within a block anchor-major, then label order.
#pragma once

#include <array>
#include <vector>

#include "data/batch.h"

namespace bareyolo::models {

using data::LabelRow;    // one label of a batch (data/batch.h)
using data::MatchedRow;  // one matched target (data/batch.h): what build_targets makes

struct LevelGrid {
  int ny, nx;
  std::vector<std::array<double, 2>> anchors;  // (w, h) in grid units of this level
};

// Refuses, naming the row, a label that is not one of a batch of `images` images and `nc`
// classes or whose box is not finite with a width and height of at least 0: the rows of a batch
// from outside the loader (`bareyolo grads`, the library's callers) are checked here before
// they index anything.
void check_label_rows(const std::vector<LabelRow>& labels, int images, int nc);

std::vector<std::vector<MatchedRow>> build_targets(const std::vector<LabelRow>& labels,
                                                   const std::vector<LevelGrid>& levels,
                                                   double anchor_t);

}  // namespace bareyolo::models
