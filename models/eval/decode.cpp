// models/eval/decode.cpp — see decode.h.
#include "models/eval/decode.h"

#include <stdexcept>

#include "kernels/route.h"
#include "models/eval/detect_cuda.h"

namespace bareyolo::models {

void decode_level(View<const float> head, const DecodeLevel& level, View<float> rows) {
  const Device device = detail::common_device("decode_level", head, rows);
  const int64_t images = head.shape.n, plane = head.shape.plane();
  if (level.anchors < 1 || level.anchors > kMaxDecodeAnchors || level.outputs < 5 ||
      head.shape.c != int64_t(level.anchors) * level.outputs ||
      level.first_row + level.anchors * plane > level.rows_per_image ||
      rows.shape.numel() != images * level.rows_per_image * level.outputs)
    throw std::invalid_argument(
        "decode_level: head " + head.shape.str() + " does not hold " +
        std::to_string(level.anchors) + " anchors x " + std::to_string(level.outputs) +
        " outputs fitting rows [" + std::to_string(level.first_row) + ", " +
        std::to_string(level.rows_per_image) + ") of " + std::to_string(rows.shape.numel()) +
        " values (at most " + std::to_string(kMaxDecodeAnchors) + " anchors)");
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(decode_level, device, head, level, rows);
  const int no = level.outputs;
  const int64_t nx = head.shape.w;
  for (int64_t image = 0; image < images; ++image)
    for (int a = 0; a < level.anchors; ++a)
      for (int64_t cell = 0; cell < plane; ++cell) {
        const int64_t gy = cell / nx, gx = cell % nx;
        float* out =
            rows.data + (image * level.rows_per_image + level.first_row + a * plane + cell) * no;
        for (int k = 0; k < no; ++k)
          out[k] = decoded_field(level, a, k, head.channel(image, a * no + k)[cell], gx, gy);
      }
}

int64_t decoded_rows_per_image(const std::vector<Tensor>& head, const DetectionModel& model) {
  if (head.empty() || head.size() != model.strides().size())
    throw std::invalid_argument("decode: " + std::to_string(head.size()) +
                                " head outputs for a model with " +
                                std::to_string(model.strides().size()) + " levels");
  int64_t rows_per_image = 0;
  for (const Tensor& level : head) rows_per_image += model.num_anchors() * level.shape().plane();
  return rows_per_image;
}

void decode_predictions(const std::vector<Tensor>& head, const DetectionModel& model,
                        View<float> rows) {
  const int na = model.num_anchors();
  DecodeLevel decode;
  decode.anchors = na;
  decode.outputs = model.outputs_per_anchor();
  decode.rows_per_image = decoded_rows_per_image(head, model);
  for (size_t level = 0; level < head.size(); ++level) {
    decode.stride = float(model.strides()[level]);
    // More anchors than a level holds: decode_level refuses them with a message.
    for (int a = 0; a < na && a < kMaxDecodeAnchors; ++a) {
      decode.anchors_grid[2 * a] = float(model.anchor(int(level), a)[0]);
      decode.anchors_grid[2 * a + 1] = float(model.anchor(int(level), a)[1]);
    }
    decode_level(head[level].view<float>(), decode, rows);
    decode.first_row += na * head[level].shape().plane();
  }
}

Tensor decode_predictions(const std::vector<Tensor>& head, const DetectionModel& model) {
  const int64_t rows_per_image = decoded_rows_per_image(head, model);  // checks the head
  const int64_t values = head[0].shape().n * rows_per_image * model.outputs_per_anchor();
  Tensor rows = Tensor::empty({1, 1, 1, values}, head[0].device());
  decode_predictions(head, model, rows.view<float>());
  return rows;
}

}  // namespace bareyolo::models
