// tests/cuda/nms.cpp — greedy NMS with the IoU bit matrix and the walk on the GPU
// (cuda::greedy_nms, a step of the GPU's NMS with no device-neutral entry, so not a selftest
// check) against models::greedy_nms: the kept indices must be identical, for random boxes in
// clusters (many overlaps near every threshold), exact duplicates, empty boxes, counts around
// the 64-box blocks, and max_keep limits. The whole NMS and detect (decode + NMS) against the
// CPU are the selftest's detect checks (tools/selftest/detect_checks.cpp, run on cuda:0 by
// tests/cuda/selftest.cpp).
#include <cmath>
#include <vector>

#include "engine/tensor.h"
#include "models/eval/detect_cuda.h"
#include "models/eval/nms.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {
std::vector<models::BoxXYXY> random_boxes(Rng& rng, int64_t count) {
  std::vector<models::BoxXYXY> boxes;
  const std::vector<double> u = random_vector(rng, 6 * count, 0, 1);
  for (int64_t i = 0; i < count; ++i) {
    const double* r = u.data() + 6 * i;
    // Ten cluster centres, sizes 10-60 px: neighbours overlap at every IoU.
    const float cx = float(100 * std::floor(r[0] * 10) + 20 * r[1]);
    const float cy = float(50 + 20 * r[2]), w = float(10 + 50 * r[3]), h = float(10 + 50 * r[4]);
    boxes.push_back({cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2});
    if (r[5] < 0.05) boxes.push_back(boxes.back());      // an exact duplicate
    if (r[5] > 0.97) boxes.push_back({cx, cy, cx, cy});  // an empty box
  }
  return boxes;
}
}  // namespace

TEST_CASE("cuda greedy nms keeps exactly the boxes the cpu keeps") {
  Rng rng(101);
  for (int64_t count : {1, 2, 63, 64, 65, 130, 1000, 3000}) {
    const std::vector<models::BoxXYXY> boxes = random_boxes(rng, count);
    std::vector<float> corners;
    for (const models::BoxXYXY& b : boxes) corners.insert(corners.end(), {b.x1, b.y1, b.x2, b.y2});
    const Tensor on_gpu =
        Tensor::from_vector(corners, {1, 1, 1, int64_t(corners.size())}, Device::cuda(0));
    for (float threshold : {0.0f, 0.3f, 0.45f, 0.7f, 1.0f})
      for (int64_t max_keep : {int64_t(1), int64_t(7), int64_t(300), int64_t(1) << 40}) {
        INFO(boxes.size() << " boxes, threshold " << threshold << ", max_keep " << max_keep);
        const std::vector<int64_t> expected = models::greedy_nms(boxes, threshold, max_keep);
        const std::vector<int64_t> kept = cuda::greedy_nms(
            on_gpu.view<float>().data, int64_t(boxes.size()), threshold, max_keep, 0);
        CHECK(kept == expected);
      }
  }
}
