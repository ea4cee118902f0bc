// tools/selftest/random_matched_rows.h — random matched rows (build_targets' output) for the
// loss's checks (loss_checks.cpp) and tests (tests/unit/cuda_loss_logic.cpp): `count` rows
// on a head of images x anchors x ny x nx cells with random targets and classes, about a third
// of them on the cell of an earlier row (YOLOv5 lets several rows share a cell, and the last
// one's objectness target wins).
#pragma once

#include <random>
#include <vector>

#include "models/loss/loss_targets.h"

namespace bareyolo::selftest {

inline std::vector<models::MatchedRow> random_matched_rows(std::mt19937_64& engine, int count,
                                                           int images, int anchors, int ny, int nx,
                                                           int classes) {
  const auto integer = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(engine);
  };
  std::vector<models::MatchedRow> rows;
  for (int k = 0; k < count; ++k) {
    double u[6];
    for (double& v : u) v = std::uniform_real_distribution<double>(0, 1)(engine);
    models::MatchedRow r{integer(0, images - 1), integer(0, anchors - 1), integer(0, ny - 1),
                         integer(0, nx - 1),     -0.5 + 2 * u[0],         -0.5 + 2 * u[1],
                         0.2 + 6 * u[2],         0.2 + 6 * u[3],          0.5 + 4 * u[4],
                         0.5 + 4 * u[5],         integer(0, classes - 1)};
    if (!rows.empty() && integer(0, 2) == 0) {  // the cell of an earlier row
      const models::MatchedRow& earlier = rows[size_t(integer(0, int(rows.size()) - 1))];
      r.image = earlier.image, r.anchor = earlier.anchor, r.gj = earlier.gj, r.gi = earlier.gi;
    }
    rows.push_back(r);
  }
  return rows;
}

}  // namespace bareyolo::selftest
