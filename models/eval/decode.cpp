// models/eval/decode.cpp — see decode.h.
#include "models/eval/decode.h"

#include <cmath>
#include <stdexcept>

#ifdef BAREYOLO_WITH_CUDA
#include "models/eval/detect_cuda.h"
#endif

namespace bareyolo::models {

namespace {
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
}  // namespace

int64_t decoded_rows_per_image(const std::vector<Tensor>& head, const DetectionModel& model) {
  if (head.empty() || head.size() != model.strides().size())
    throw std::invalid_argument("decode: " + std::to_string(head.size()) +
                                " head outputs for a model with " +
                                std::to_string(model.strides().size()) + " levels");
  int64_t rows_per_image = 0;
  for (const Tensor& level : head) rows_per_image += model.num_anchors() * level.shape().plane();
  return rows_per_image;
}

std::vector<float> decode_predictions(const std::vector<Tensor>& head,
                                      const DetectionModel& model) {
  const int no = model.outputs_per_anchor(), na = model.num_anchors();
  const int64_t rows_per_image = decoded_rows_per_image(head, model);
  const int64_t images = head[0].shape().n;

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

#ifdef BAREYOLO_WITH_CUDA
void decode_predictions_on_device(const std::vector<Tensor>& head, const DetectionModel& model,
                                  float* rows) {
  const int na = model.num_anchors();
  cuda::DecodeLevel decode;
  decode.anchors = na;
  decode.outputs = model.outputs_per_anchor();
  decode.rows_per_image = decoded_rows_per_image(head, model);
  for (size_t level = 0; level < head.size(); ++level) {
    decode.stride = float(model.strides()[level]);
    // More anchors than the kernel holds: detect_decode_level refuses them with a message.
    for (int a = 0; a < na && a < cuda::kMaxDecodeAnchors; ++a) {
      decode.anchors_grid[2 * a] = float(model.anchor(int(level), a)[0]);
      decode.anchors_grid[2 * a + 1] = float(model.anchor(int(level), a)[1]);
    }
    cuda::detect_decode_level(head[level].view<float>(), decode, rows);
    decode.first_row += na * head[level].shape().plane();
  }
}
#endif

}  // namespace bareyolo::models
