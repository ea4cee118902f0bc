// tests/cuda/decode.cpp — the Detect decode kernel refuses a head that does not match its level.
// Its comparison with the CPU's decode is the selftest's Detect decode check
// (tools/selftest/detect_checks.cpp, run on cuda:0 by tests/cuda/selftest.cpp).
#include <doctest/doctest.h>

#include <stdexcept>

#include "engine/tensor.h"
#include "models/eval/decode.h"

using namespace bareyolo;

TEST_CASE("cuda detect decode refuses a head that does not match the level") {
  Tensor head = Tensor::zeros({1, 20, 4, 4}, Device::cuda(0));
  Tensor rows = Tensor::zeros({1, 1, 1, 48 * 7}, Device::cuda(0));
  models::DecodeLevel d;
  d.anchors = 3;
  d.outputs = 7;  // 21 channels expected
  d.rows_per_image = 48;
  CHECK_THROWS_AS(models::decode_level(head.view<float>(), d, rows.view<float>()),
                  std::invalid_argument);
}
