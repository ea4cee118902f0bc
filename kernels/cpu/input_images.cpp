// kernels/cpu/input_images.cpp — the loader's bytes as the model's float input, and the
// bilinear resize of --multi-scale (kernels/ops.h; the element formulas are
// kernels/input_images.h's, shared with the CUDA kernels).
#include "kernels/input_images.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/loops.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "kernels/route.h"

namespace bareyolo::ops {

void hwc_bytes_to_unit_float(View<const uint8_t> x, View<float> y) {
  const Shape4 channels_last{y.shape.n, y.shape.h, y.shape.w, y.shape.c};
  if (!(x.shape == channels_last))
    throw std::invalid_argument(
        "hwc_bytes_to_unit_float: bytes of shape " + x.shape.str() + " for floats of shape " +
        y.shape.str() + "; the bytes must be the floats' (n, h, w, c) " + channels_last.str());
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(hwc_bytes_to_unit_float,
                                  detail::common_device("hwc_bytes_to_unit_float", x, y), x, y);
  const int64_t channels = y.shape.c;
  // Ranges of pixels: each pixel's c bytes go to the same place of the c planes.
  cpu::parallel_over_elements({y.shape.n, 1, y.shape.h, y.shape.w},
                              [&](int64_t n, int64_t begin, int64_t end) {
                                const uint8_t* pixels = x.image(n);
                                for (int64_t c = 0; c < channels; ++c) {
                                  float* plane = y.channel(n, c);
                                  for (int64_t i = begin; i < end; ++i)
                                    plane[i] = pixels[i * channels + c] * kUnitPerByte;
                                }
                              });
}

namespace {

// The taps of every output coordinate along one axis (the same for every plane).
std::vector<BilinearTap> taps(int in_size, int out_size) {
  std::vector<BilinearTap> result(static_cast<size_t>(out_size));
  for (int o = 0; o < out_size; ++o) result[size_t(o)] = bilinear_tap(o, in_size, out_size);
  return result;
}

}  // namespace

void resize_bilinear(View<const float> x, View<float> y) {
  const bool sides_valid = x.shape.h >= 1 && x.shape.w >= 1 && y.shape.h >= 1 && y.shape.w >= 1;
  if (x.shape.n != y.shape.n || x.shape.c != y.shape.c || !sides_valid)
    throw std::invalid_argument("resize_bilinear: " + x.shape.str() + " to " + y.shape.str() +
                                "; the images and channels must agree and every side be >= 1");
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(resize_bilinear, detail::common_device("resize_bilinear", x, y),
                                  x, y);
  const int in_height = int(x.shape.h), in_width = int(x.shape.w);
  const int out_height = int(y.shape.h), out_width = int(y.shape.w);
  const std::vector<BilinearTap> columns = taps(in_width, out_width);
  const std::vector<BilinearTap> rows = taps(in_height, out_height);
  cpu::parallel_over_planes(y.shape, [&](int64_t n, int64_t c) {
    const float* in = x.channel(n, c);
    float* out = y.channel(n, c);
    for (int oy = 0; oy < out_height; ++oy) {
      const BilinearTap& row = rows[size_t(oy)];
      const float* top = in + int64_t(row.first) * in_width;
      const float* bottom = in + int64_t(row.second) * in_width;
      float* line = out + int64_t(oy) * out_width;
      for (int ox = 0; ox < out_width; ++ox)
        line[ox] = bilinear_sample(top, bottom, row, columns[size_t(ox)]);
    }
  });
}

}  // namespace bareyolo::ops
