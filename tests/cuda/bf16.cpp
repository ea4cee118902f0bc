// tests/cuda/bf16.cpp — the CUDA float <-> bf16 conversions and rounding in place against the
// CPU's, bit for bit, on random floats of every magnitude and on channel slices, outputs
// poisoned first.
#include <cstring>

#include "kernels/ops.h"
#include "tests/cuda/cuda_testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("cuda bf16 conversions and rounding equal the cpu bit for bit") {
  Rng rng(1603);
  const Shape4 parent = {3, 6, 17, 9};
  std::vector<float> values = random_vector<float>(rng, parent.numel(), -1, 1);
  std::uniform_int_distribution<int> exponent(-120, 120);
  for (float& v : values) v = std::ldexp(v, exponent(rng));  // every magnitude
  Tensor x = Tensor::from_vector(values, parent);

  // f32 -> bf16 on a slice, into a poisoned bf16 tensor.
  const std::vector<bf16> poison(size_t(parent.numel()), bf16{0xffff});
  Tensor cpu_narrow = Tensor::from_vector(poison, parent);
  Tensor gpu_narrow = cpu_narrow.to(Device::cuda(0));
  Tensor gpu_x = x.to(Device::cuda(0));
  Tensor cpu_slice = cpu_narrow.channels(2, 5), gpu_slice = gpu_narrow.channels(2, 5);
  ops::convert_to_bf16(x.channels(2, 5).view<float>(), cpu_slice.view<bf16>());
  ops::convert_to_bf16(gpu_x.channels(2, 5).view<float>(), gpu_slice.view<bf16>());
  const std::vector<bf16> cpu_bits = cpu_narrow.to_vector<bf16>(),
                          gpu_bits = gpu_narrow.to_vector<bf16>();
  for (size_t i = 0; i < cpu_bits.size(); ++i) REQUIRE(gpu_bits[i].bits == cpu_bits[i].bits);

  // bf16 -> f32 and rounding in place, through the float comparer (bit for bit).
  compare_cuda_with_cpu(
      {x}, {Tensor::empty(parent)},
      [](auto& in, auto& out) {
        Tensor narrow = in[0].converted(DType::bf16);
        ops::convert_from_bf16(narrow.template view<bf16>(), out[0].template view<float>());
      },
      "convert from bf16", true, 0, 0);
  compare_cuda_with_cpu(
      {x}, {x},
      [](auto&, auto& out) {
        Tensor slice = out[0].channels(1, 4);
        ops::round_to_bf16_in_place(slice.template view<float>());
      },
      "round to bf16 in place", /*poison_outputs=*/false, 0, 0);
}
