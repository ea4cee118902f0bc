// tests/cuda/launches.cpp — cuda::launches() counts the work an op queues on the GPU: a kernel
// launch or a library call (a cuDNN convolution, a cuBLAS GEMM) is one; a copy, and an op on the
// CPU, none. Each op's result is compared with the CPU's, so the work counted is the op's own
// (how close it must be is the selftest's to check: tools/selftest).
#include <cstdint>
#include <vector>

#include "kernels/cuda/runtime/runtime.h"
#include "kernels/ops.h"
#include "tests/support/random_tensor.h"
#include "tools/selftest/convolution_settings.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

const Device kGpu = Device::cuda(0);

// How many launches `work` queued.
template <class Work>
uint64_t launches_of(Work&& work) {
  const uint64_t before = cuda::launches();
  work();
  return cuda::launches() - before;
}

}  // namespace

TEST_CASE("cuda launches: an elementwise op is one, a copy or an op on the CPU none") {
  Rng rng(41);
  const Shape4 shape{2, 3, 5, 7};
  const Tensor a = random_tensor(rng, shape), b = random_tensor(rng, shape);
  Tensor expected = Tensor::empty(shape);
  CHECK(launches_of([&] {
          ops::add_forward<float>(a.view<float>(), b.view<float>(), expected.view<float>());
        }) == 0);
  Tensor a_gpu, b_gpu;
  CHECK(launches_of([&] {
          a_gpu = a.to(kGpu);
          b_gpu = b.to(kGpu);
        }) == 0);
  Tensor sum = Tensor::empty(shape, kGpu);
  CHECK(launches_of([&] {
          ops::add_forward<float>(a_gpu.view<float>(), b_gpu.view<float>(), sum.view<float>());
        }) == 1);
  std::vector<float> values;
  CHECK(launches_of([&] { values = sum.to_vector<float>(); }) == 0);
  check_close(values, expected.to_vector<float>(), 0, 0, "a + b");
}

TEST_CASE("cuda launches: a convolution pass is one library call, a bias one kernel more") {
  Rng rng(43);
  // 1 x 1, stride 1: on the gemm path each image is its own column matrix (no im2col kernel),
  // so the forward and backward-data passes are one GEMM each over the batch; the weight
  // gradient is one GEMM per image.
  const ops::Conv2dParams p{};
  const Shape4 x_shape{3, 16, 9, 11}, w_shape{8, 16, 1, 1}, y_shape{3, 8, 9, 11},
      bias_shape{1, 8, 1, 1};
  const Tensor x = random_tensor(rng, x_shape, -1, 1), w = random_tensor(rng, w_shape, -1, 1),
               bias = random_tensor(rng, bias_shape, -1, 1),
               dy = random_tensor(rng, y_shape, -1, 1);
  Tensor y_cpu = Tensor::empty(y_shape), dx_cpu = Tensor::zeros(x_shape),
         dw_cpu = Tensor::zeros(w_shape), dbias_cpu = Tensor::zeros(bias_shape);
  ops::conv2d_forward<float>(x.view<float>(), w.view<float>(), bias.view<float>().data, p,
                             y_cpu.view<float>());
  ops::conv2d_backward_data<float>(dy.view<float>(), w.view<float>(), p, dx_cpu.view<float>());
  ops::conv2d_backward_weight<float>(x.view<float>(), dy.view<float>(), p, dw_cpu.view<float>(),
                                     dbias_cpu.view<float>().data);
  const Tensor x_gpu = x.to(kGpu), w_gpu = w.to(kGpu), bias_gpu = bias.to(kGpu),
               dy_gpu = dy.to(kGpu);
  for (const ops::GpuConvolutionPath path : selftest::kConvPaths) {
    CAPTURE(selftest::path_name(path));
    const selftest::ConvolutionSettings settings(path, false);
    const bool gemm = path == ops::GpuConvolutionPath::gemm;
    Tensor y = Tensor::empty(y_shape, kGpu), dx = Tensor::zeros(x_shape, kGpu),
           dw = Tensor::zeros(w_shape, kGpu), dbias = Tensor::zeros(bias_shape, kGpu);
    CHECK(launches_of([&] {
            ops::conv2d_forward<float>(x_gpu.view<float>(), w_gpu.view<float>(), nullptr, p,
                                       y.view<float>());
          }) == 1);
    CHECK(launches_of([&] {
            ops::conv2d_forward<float>(x_gpu.view<float>(), w_gpu.view<float>(),
                                       bias_gpu.view<float>().data, p, y.view<float>());
          }) == 2);
    CHECK(launches_of([&] {
            ops::conv2d_backward_data<float>(dy_gpu.view<float>(), w_gpu.view<float>(), p,
                                             dx.view<float>());
          }) == 1);
    const uint64_t weight_calls = gemm ? uint64_t(x_shape.n) : 1;
    CHECK(launches_of([&] {
            ops::conv2d_backward_weight<float>(x_gpu.view<float>(), dy_gpu.view<float>(), p,
                                               dw.view<float>(), dbias.view<float>().data);
          }) == weight_calls + 1);
    check_close(y.to_vector<float>(), y_cpu.to_vector<float>(), 1e-4, 1e-4, "y");
    check_close(dx.to_vector<float>(), dx_cpu.to_vector<float>(), 1e-4, 1e-4, "dx");
    check_close(dw.to_vector<float>(), dw_cpu.to_vector<float>(), 1e-4, 1e-4, "dweight");
    check_close(dbias.to_vector<float>(), dbias_cpu.to_vector<float>(), 1e-4, 1e-4, "dbias");
  }
}
