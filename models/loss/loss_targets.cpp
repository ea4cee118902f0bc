// models/loss/loss_targets.cpp — see loss_targets.h. The arithmetic is float, as YOLOv5's (its
// targets are float32 tensors), so the edge tests (frac < 0.5, ratio < anchor_t) decide the
// same way on values that sit exactly on an edge.
#include "models/loss/loss_targets.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace bareyolo::models {

void check_label_rows(const std::vector<LabelRow>& labels, int images, int nc) {
  for (size_t k = 0; k < labels.size(); ++k) {
    const LabelRow& r = labels[k];
    std::string problem;
    if (r.image < 0 || r.image >= images)
      problem = "image " + std::to_string(r.image) + " is not one of the batch's " +
                std::to_string(images) + " images (0.." + std::to_string(images - 1) + ")";
    else if (r.class_id < 0 || r.class_id >= nc)
      problem = "class " + std::to_string(r.class_id) + " is not one of the model's " +
                std::to_string(nc) + " classes (0.." + std::to_string(nc - 1) + ")";
    else if (!std::isfinite(r.cx) || !std::isfinite(r.cy) || !std::isfinite(r.w) ||
             !std::isfinite(r.h) || r.w < 0 || r.h < 0)
      problem = "the box (" + std::to_string(r.cx) + ", " + std::to_string(r.cy) + ", " +
                std::to_string(r.w) + ", " + std::to_string(r.h) +
                ") is not finite with a width and height of at least 0";
    if (!problem.empty())
      throw std::invalid_argument("label row " + std::to_string(k) +
                                  " (image, class, cx, cy, w, h): " + problem);
  }
}

std::vector<std::vector<MatchedRow>> build_targets(const std::vector<LabelRow>& labels,
                                                   const std::vector<LevelGrid>& levels,
                                                   double anchor_t) {
  // The five cell offsets, in YOLOv5's block order: centre, left, up, right, down.
  constexpr float offsets[5][2] = {{0, 0}, {0.5f, 0}, {0, 0.5f}, {-0.5f, 0}, {0, -0.5f}};
  std::vector<std::vector<MatchedRow>> result(levels.size());
  for (size_t level = 0; level < levels.size(); ++level) {
    const LevelGrid& grid = levels[level];
    const float nx = static_cast<float>(grid.nx), ny = static_cast<float>(grid.ny);
    for (int block = 0; block < 5; ++block) {
      for (size_t a = 0; a < grid.anchors.size(); ++a) {
        const float aw = static_cast<float>(grid.anchors[a][0]);
        const float ah = static_cast<float>(grid.anchors[a][1]);
        for (const LabelRow& label : labels) {
          const float gx = label.cx * nx, gy = label.cy * ny;
          const float gw = label.w * nx, gh = label.h * ny;
          const float rw = gw / aw, rh = gh / ah;
          if (!(std::max({rw, 1 / rw, rh, 1 / rh}) < static_cast<float>(anchor_t))) continue;
          const float gxi = nx - gx, gyi = ny - gy;  // distances from the far edges
          auto near_low = [](float g) { return std::fmod(g, 1.0f) < 0.5f && g > 1.0f; };
          const bool take[5] = {true, near_low(gx), near_low(gy), near_low(gxi), near_low(gyi)};
          if (!take[block]) continue;
          // The cell, truncated toward zero, then clamped into the grid (tbox uses the clamp).
          const int gi = std::clamp(static_cast<int>(gx - offsets[block][0]), 0, grid.nx - 1);
          const int gj = std::clamp(static_cast<int>(gy - offsets[block][1]), 0, grid.ny - 1);
          result[level].push_back({label.image, static_cast<int>(a), gj, gi,
                                   static_cast<double>(gx - static_cast<float>(gi)),
                                   static_cast<double>(gy - static_cast<float>(gj)),
                                   static_cast<double>(gw), static_cast<double>(gh),
                                   grid.anchors[a][0], grid.anchors[a][1], label.class_id});
        }
      }
    }
  }
  return result;
}

}  // namespace bareyolo::models
