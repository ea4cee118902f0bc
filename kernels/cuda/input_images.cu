// kernels/cuda/input_images.cu — the batch's bytes to the model's float input, and
// --multi-scale's bilinear resize, on the GPU: one thread per pixel (its c bytes to the c
// planes) and one per output value, with the element formulas of kernels/input_images.h (the
// CPU's). The conversion is one exact product per value, so it gives the CPU's bits; the resize
// gives them to a rounding or two, as the two compilers fuse its multiply-adds differently.
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/pointwise.cuh"
#include "kernels/input_images.h"

namespace bareyolo::cuda {

namespace {

struct BytesToUnitFloat {
  View<const uint8_t> x;
  View<float> y;
  __device__ void operator()(int64_t n, int64_t pixel) const {
    const int64_t channels = y.shape.c;
    const uint8_t* bytes = x.image(n) + pixel * channels;
    for (int64_t c = 0; c < channels; ++c) y.channel(n, c)[pixel] = bytes[c] * kUnitPerByte;
  }
};

struct ResizeBilinear {
  View<const float> x;
  View<float> y;
  __device__ void operator()(int64_t n, int64_t offset) const {
    const int64_t plane = y.shape.plane();
    const int64_t c = offset / plane, at = offset % plane;
    const int oy = int(at / y.shape.w), ox = int(at % y.shape.w);
    const int in_height = int(x.shape.h), in_width = int(x.shape.w);
    const BilinearTap row = bilinear_tap(oy, in_height, int(y.shape.h));
    const BilinearTap column = bilinear_tap(ox, in_width, int(y.shape.w));
    const float* in = x.channel(n, c);
    y.image(n)[offset] = bilinear_sample(in + int64_t(row.first) * in_width,
                                         in + int64_t(row.second) * in_width, row, column);
  }
};

}  // namespace

void hwc_bytes_to_unit_float(View<const uint8_t> x, View<float> y) {
  // Per image, not flat: the (image, pixel) pair places the pixel in strided views too.
  launch_pointwise({y.shape.n, 1, y.shape.h, y.shape.w}, y.device, false, BytesToUnitFloat{x, y});
}

void resize_bilinear(View<const float> x, View<float> y) {
  launch_pointwise(y.shape, y.device, false, ResizeBilinear{x, y});
}

}  // namespace bareyolo::cuda
