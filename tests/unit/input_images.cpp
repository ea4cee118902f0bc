// tests/unit/input_images.cpp — the input-image ops on the CPU (kernels/ops.h): the batch's
// HWC bytes to float NCHW, against the plain loop of tests/support/random_images.h, into dense
// and channel-slice outputs; the bilinear resize against its definition and PyTorch's numbers,
// every plane of a batch alike; and the shapes each refuses. (tests/cuda/batch_upload.cpp holds
// the GPU kernels to these.)
#include <limits>
#include <vector>

#include "engine/tensor.h"
#include "kernels/ops.h"
#include "tests/support/random_images.h"
#include "tests/support/random_tensor.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

Tensor poisoned(Shape4 shape) {
  return Tensor::from_vector(
      std::vector<float>(size_t(shape.numel()), std::numeric_limits<float>::quiet_NaN()), shape);
}

// resize_bilinear of one plane of in_width x in_height values.
std::vector<float> resize_plane(const std::vector<float>& plane, int in_width, int in_height,
                                int out_width, int out_height) {
  const Tensor in = Tensor::from_vector(plane, {1, 1, in_height, in_width});
  Tensor out = poisoned({1, 1, out_height, out_width});
  ops::resize_bilinear(in.view<float>(), out.view<float>());
  return out.to_vector<float>();
}

}  // namespace

TEST_CASE("hwc_bytes_to_unit_float: byte * (1 / 255) from channels-last bytes to NCHW planes") {
  Rng rng(71);
  const int64_t n = 2, height = 5, width = 7;
  const std::vector<uint8_t> bytes = random_bytes(rng, size_t(n * height * width * 3));
  const Tensor x = Tensor::from_vector(bytes, {n, height, width, 3});
  Tensor y = poisoned({n, 3, height, width});
  ops::hwc_bytes_to_unit_float(x.view<uint8_t>(), y.view<float>());
  CHECK(y.to_vector<float>() == unit_floats_nchw(bytes.data(), n, height, width));

  // Into channels 1..3 of a 5-channel batch: the other channels keep what they held.
  Tensor wide = random_tensor(rng, {n, 5, height, width});
  const Tensor before = wide.to(Device::cpu());
  ops::hwc_bytes_to_unit_float(x.view<uint8_t>(), wide.channels(1, 4).view<float>());
  CHECK(wide.channels(1, 4).to_vector<float>() == unit_floats_nchw(bytes.data(), n, height, width));
  for (int64_t kept : {0, 4})
    CHECK(wide.channels(kept, kept + 1).to_vector<float>() ==
          before.channels(kept, kept + 1).to_vector<float>());
}

TEST_CASE("hwc_bytes_to_unit_float: bytes that are not the floats' (n, h, w, c) are refused") {
  const Tensor nchw_bytes =
      Tensor::from_vector(std::vector<uint8_t>(2 * 3 * 4 * 5, 7), {2, 3, 4, 5});
  Tensor y = Tensor::zeros({2, 3, 4, 5});
  CHECK_THROWS_WITH_AS(
      ops::hwc_bytes_to_unit_float(nchw_bytes.view<uint8_t>(), y.view<float>()),
      "hwc_bytes_to_unit_float: bytes of shape (2,3,4,5) for floats of shape (2,3,4,5); the bytes "
      "must be the floats' (n, h, w, c) (2,4,5,3)",
      std::invalid_argument);
}

TEST_CASE("resize_bilinear, align_corners=False: the definition and PyTorch's numbers") {
  // Up 2 -> 4: samples at max(0, (x + 0.5) / 2 - 0.5) = 0, 0.25, 0.75, 1.25 (the last clamps).
  CHECK(resize_plane({0, 1}, 2, 1, 4, 1) == std::vector<float>{0, 0.25f, 0.75f, 1});
  // Down 4 -> 2: samples at 0.5 and 2.5, the means of neighbours.
  const std::vector<float> half = resize_plane({0, 1, 2, 3}, 4, 1, 2, 1);
  CHECK(half[0] == doctest::Approx(0.5));
  CHECK(half[1] == doctest::Approx(2.5));

  // A 4 x 3 plane of (4 r + c)^2 / 100 to 7 x 5 and 3 x 2, against torch 1.13's
  // F.interpolate(x, size=(h, w), mode='bilinear', align_corners=False), printed to 7 decimals.
  std::vector<float> plane;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) plane.push_back(float((4 * r + c) * (4 * r + c)) / 100);
  const std::vector<float> torch_7x5 = {
      0.0f,   0.0035714f, 0.0092857f, 0.025f,     0.0435714f, 0.0721429f, 0.09f,
      0.064f, 0.079f,     0.103f,     0.137f,     0.1738572f, 0.2207143f, 0.25f,
      0.16f,  0.1921429f, 0.2435715f, 0.305f,     0.3692858f, 0.4435715f, 0.4900001f,
      0.448f, 0.4972857f, 0.5761429f, 0.6650001f, 0.7567143f, 0.8584287f, 0.9220001f,
      0.64f,  0.7007142f, 0.7978572f, 0.905f,     1.0150001f, 1.1350001f, 1.21f};
  const std::vector<float> torch_3x2 = {0.045f, 0.095f, 0.1783333f, 0.545f, 0.755f, 0.9983333f};
  check_close(resize_plane(plane, 4, 3, 7, 5), torch_7x5, 1e-6, 1e-6, "7 x 5");
  check_close(resize_plane(plane, 4, 3, 3, 2), torch_3x2, 1e-6, 1e-6, "3 x 2");
}

TEST_CASE("resize_bilinear: every plane of a batch as the plane alone, strided input included") {
  Rng rng(72);
  const Shape4 in_shape{2, 3, 9, 13};
  for (const Shape4 out_shape : {Shape4{2, 3, 14, 20}, Shape4{2, 3, 5, 6}, Shape4{2, 3, 9, 13}}) {
    CAPTURE(out_shape.str());
    // The input as channels 1..3 of a 4-channel batch: images batch_stride apart.
    const Tensor parent = random_tensor(rng, {in_shape.n, 4, in_shape.h, in_shape.w}, 0, 1);
    const Tensor x = parent.channels(1, 4);
    Tensor y = poisoned(out_shape);
    ops::resize_bilinear(x.view<float>(), y.view<float>());
    for (int64_t n = 0; n < in_shape.n; ++n)
      for (int64_t c = 0; c < in_shape.c; ++c) {
        const std::vector<float> alone =
            resize_plane(x.images(n, n + 1).channels(c, c + 1).to_vector<float>(), int(in_shape.w),
                         int(in_shape.h), int(out_shape.w), int(out_shape.h));
        CHECK(y.images(n, n + 1).channels(c, c + 1).to_vector<float>() == alone);
      }
  }
  // The same size: each value read back exactly (weights 1 and 0).
  Tensor same = poisoned(in_shape);
  const Tensor x = random_tensor(rng, in_shape, 0, 1);
  ops::resize_bilinear(x.view<float>(), same.view<float>());
  CHECK(same.to_vector<float>() == x.to_vector<float>());
}

TEST_CASE("resize_bilinear: other images or channels, or an empty side, are refused") {
  const Tensor x = Tensor::zeros({2, 3, 4, 5});
  Tensor fewer_channels = Tensor::zeros({2, 1, 8, 10}), no_rows = Tensor::zeros({2, 3, 0, 10});
  CHECK_THROWS_WITH_AS(ops::resize_bilinear(x.view<float>(), fewer_channels.view<float>()),
                       "resize_bilinear: (2,3,4,5) to (2,1,8,10); the images and channels must "
                       "agree and every side be >= 1",
                       std::invalid_argument);
  CHECK_THROWS_AS(ops::resize_bilinear(x.view<float>(), no_rows.view<float>()),
                  std::invalid_argument);
}
