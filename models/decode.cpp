// models/decode.cpp — see decode.h.
#include "models/decode.h"

#include <cmath>
#include <stdexcept>

namespace bareyolo::models {

namespace {
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
}  // namespace

std::vector<float> decode_predictions(const std::vector<Tensor>& head, const DetectionModel& model) {
  const int no = model.outputs_per_anchor(), na = model.num_anchors();
  if (head.size() != model.strides().size())
    throw std::invalid_argument("decode_predictions: " + std::to_string(head.size()) +
                                " head outputs for a model with " +
                                std::to_string(model.strides().size()) + " levels");
  const int64_t images = head[0].shape().n;
  int64_t rows_per_image = 0;
  for (const Tensor& level : head) rows_per_image += na * level.shape().plane();

  std::vector<float> rows(size_t(images * rows_per_image * no));
  int64_t level_first_row = 0;
  for (size_t level = 0; level < head.size(); ++level) {
    const std::vector<float> values = head[level].to_vector<float>();  // dense host copy
    const Shape4 s = head[level].shape();
    const float stride = static_cast<float>(model.strides()[level]);
    for (int64_t image = 0; image < images; ++image)
      for (int a = 0; a < na; ++a) {
        const auto anchor = model.anchor(int(level), a);
        for (int64_t gy = 0; gy < s.h; ++gy)
          for (int64_t gx = 0; gx < s.w; ++gx) {
            const int64_t row = level_first_row + (a * s.h + gy) * s.w + gx;
            float* out = rows.data() + (image * rows_per_image + row) * no;
            auto field = [&](int k) {
              return sigmoid(values[size_t(((image * s.c + a * no + k) * s.h + gy) * s.w + gx)]);
            };
            out[0] = (2 * field(0) - 0.5f + float(gx)) * stride;
            out[1] = (2 * field(1) - 0.5f + float(gy)) * stride;
            out[2] = std::pow(2 * field(2), 2.0f) * float(anchor[0]) * stride;
            out[3] = std::pow(2 * field(3), 2.0f) * float(anchor[1]) * stride;
            for (int k = 4; k < no; ++k) out[k] = field(k);
          }
      }
    level_first_row += na * s.plane();
  }
  return rows;
}

}  // namespace bareyolo::models
