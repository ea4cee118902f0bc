// tests/unit/decode.cpp — the Detect head's inference decode, against its formulas on
// hand-set logits, and the row order (level, anchor, y, x).
#include <cmath>

#include "engine/shipped_files.h"
#include "models/eval/decode.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::models;

TEST_CASE("decode turns logits into pixel boxes in YOLOv5's row order") {
  DetectionModel model(load_model_config(shipped_file("models/yolov5-tiny.yaml")), {.nc = 2});
  const int no = 7;
  // Input 64x64: levels 8x8, 4x4, 2x2. All logits 0 (sigmoid 0.5) except one cell.
  std::vector<Tensor> head;
  for (int size : {8, 4, 2}) head.push_back(Tensor::zeros({1, 3 * no, size, size}));
  // Level 1, anchor 2, cell (gy 3, gx 1): tx = ln 3 (s = 0.75), ty = 0 (s = 0.5), tw = ln 3
  // (s = 0.75), th = -ln 3 (s = 0.25), obj logit 2.
  {
    std::vector<float> values(size_t(head[1].numel()), 0.0f);
    auto at = [&](int field) -> float& {
      return values[size_t(((2 * no + field) * 4 + 3) * 4 + 1)];
    };
    at(0) = std::log(3.0f);
    at(2) = std::log(3.0f);
    at(3) = -std::log(3.0f);
    at(4) = 2.0f;
    head[1] = Tensor::from_vector(values, head[1].shape());
  }
  std::vector<float> rows = decode_predictions(head, model).to_vector<float>();
  REQUIRE(rows.size() == size_t((3 * 64 + 3 * 16 + 3 * 4) * no));
  // Row 0: level 0, anchor 0, cell (0, 0): centre (0.5 * 8, 0.5 * 8), size = anchor in pixels.
  CHECK(rows[0] == doctest::Approx(4.0));
  CHECK(rows[1] == doctest::Approx(4.0));
  CHECK(rows[2] == doctest::Approx(10.0));  // anchor 1.25 cells * stride 8
  CHECK(rows[3] == doctest::Approx(13.0));
  CHECK(rows[4] == doctest::Approx(0.5));
  // The set cell: row 3*64 + 2*16 + 3*4 + 1.
  const float* r = rows.data() + size_t((3 * 64 + 2 * 16 + 3 * 4 + 1) * no);
  CHECK(r[0] == doctest::Approx((2 * 0.75 - 0.5 + 1) * 16));
  CHECK(r[1] == doctest::Approx((2 * 0.5 - 0.5 + 3) * 16));
  // Sizes (2 s)^2 times P4 anchor 2 in pixels (59 x 119): 2.25 and 0.25 of it.
  CHECK(r[2] == doctest::Approx(2.25 * 3.6875 * 16));
  CHECK(r[3] == doctest::Approx(0.25 * 7.4375 * 16));
  CHECK(r[4] == doctest::Approx(1 / (1 + std::exp(-2.0))));
}
