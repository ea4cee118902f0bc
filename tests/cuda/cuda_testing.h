// tests/cuda/cuda_testing.h — the one CUDA-vs-CPU comparer every CUDA test uses: the same op runs
// on copies of the same random host tensors on the GPU and on the CPU, the GPU outputs
// having been poisoned with NaN first (all bytes 0xFF, a NaN in float and in bf16), and the
// results must agree within the tolerance stated for the dtype.
#pragma once

#include <functional>
#include <vector>

#include "engine/tensor.h"
#include "kernels/cuda/runtime/runtime.h"
#include "tests/support/testing.h"

namespace bareyolo::testing {

// float32: kernels use the same formulas as the CPU in a different order and with the GPU's
// expf, so a few ulps apart; 1e-5 relative plus 1e-6 absolute covers it.
constexpr double kFloatRtol = 1e-5, kFloatAtol = 1e-6;
// bf16 results (mixed precision): the GPU and the CPU compute the same float values up to the
// order of float operations, but a value near the midpoint of two bf16 neighbours may round to
// either, so a result may differ by one bf16 step: 2^-7 relative (plus an absolute term for
// values near zero, where cancellation leaves only rounding).
constexpr double kBf16Rtol = 1.0 / 128, kBf16Atol = 2e-3;

// `inputs` are host tensors; `outputs` give the shapes and dtypes (f32 or bf16) of the op's
// outputs (their contents are accumulated into by backward ops, so they are copied to both
// devices as they are).
// op(inputs, outputs) runs the op on tensors of one device. Kernels that only move or compare
// values, or add in the CPU's order, are held to rtol = atol = 0 (bit for bit).
inline void compare_cuda_with_cpu(
    const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
    const std::function<void(std::vector<Tensor>&, std::vector<Tensor>&)>& op, const char* what,
    bool poison_outputs = true, double rtol = kFloatRtol, double atol = kFloatAtol) {
  std::vector<Tensor> cpu_in, cpu_out, gpu_in, gpu_out;
  for (const Tensor& t : inputs) {
    cpu_in.push_back(t.to(Device::cpu()));
    gpu_in.push_back(t.to(Device::cuda(0)));
  }
  for (const Tensor& t : outputs) {
    cpu_out.push_back(t.to(Device::cpu()));
    Tensor g = t.to(Device::cuda(0));
    if (poison_outputs) {
      void* data = g.dtype() == DType::bf16 ? static_cast<void*>(g.view<bf16>().data)
                                            : static_cast<void*>(g.view<float>().data);
      cuda::fill_bytes(data, 0xFF, static_cast<size_t>(g.numel()) * dtype_size(g.dtype()), 0);
    }
    gpu_out.push_back(g);
  }
  op(cpu_in, cpu_out);
  op(gpu_in, gpu_out);
  cuda::synchronize(0);
  for (size_t i = 0; i < outputs.size(); ++i)
    check_close(gpu_out[i].to_doubles(), cpu_out[i].to_doubles(), rtol, atol, what);
}

inline Tensor random_tensor(Rng& rng, Shape4 shape, double lo = -3, double hi = 3) {
  return Tensor::from_vector(random_vector<float>(rng, shape.numel(), lo, hi), shape);
}

// random_tensor's values rounded into a bf16 tensor.
inline Tensor random_bf16_tensor(Rng& rng, Shape4 shape, double lo = -3, double hi = 3) {
  return random_tensor(rng, shape, lo, hi).converted(DType::bf16);
}

}  // namespace bareyolo::testing
