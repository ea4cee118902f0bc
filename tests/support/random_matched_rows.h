// tests/support/random_matched_rows.h — random matched rows (build_targets' output) for the loss
// tests: `count` rows on a head of images x anchors x ny x nx cells with random targets and
// classes, about a third of them on the cell of an earlier row (YOLOv5 lets several rows share a
// cell, and the last one's objectness target wins).
#pragma once

#include <vector>

#include "models/loss/loss_targets.h"
#include "tests/support/testing.h"

namespace bareyolo::testing {

inline std::vector<models::MatchedRow> random_matched_rows(Rng& rng, int count, int images,
                                                           int anchors, int ny, int nx,
                                                           int classes) {
  std::vector<models::MatchedRow> rows;
  for (int k = 0; k < count; ++k) {
    const std::vector<double> u = random_vector(rng, 6, 0, 1);
    models::MatchedRow r{random_int(rng, 0, images - 1),
                         random_int(rng, 0, anchors - 1),
                         random_int(rng, 0, ny - 1),
                         random_int(rng, 0, nx - 1),
                         -0.5 + 2 * u[0],
                         -0.5 + 2 * u[1],
                         0.2 + 6 * u[2],
                         0.2 + 6 * u[3],
                         0.5 + 4 * u[4],
                         0.5 + 4 * u[5],
                         random_int(rng, 0, classes - 1)};
    if (!rows.empty() && random_int(rng, 0, 2) == 0) {  // the cell of an earlier row
      const models::MatchedRow& earlier = rows[size_t(random_int(rng, 0, int(rows.size()) - 1))];
      r.image = earlier.image, r.anchor = earlier.anchor, r.gj = earlier.gj, r.gi = earlier.gi;
    }
    rows.push_back(r);
  }
  return rows;
}

}  // namespace bareyolo::testing
