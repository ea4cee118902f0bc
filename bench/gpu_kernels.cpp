// bench/gpu_kernels.cpp — bench_gpu_kernels: the hand-written memory-bound CUDA kernels at the
// shapes of yolov5s at 640 x 640, batch 32, against a device-to-device cudaMemcpy measured in
// the same run (the practical bandwidth limit of this GPU). The convolutions, which cuDNN runs,
// are bench_gpu_convolutions' (bench/gpu_convolutions.cpp).
//
// Every tensor a bandwidth is measured on is at least twice the GPU's L2 cache (read at run
// time): where batch 32 is smaller the batch grows (the optimizer's flat buffer, more
// parameters). A tensor that fits in L2 would be read from there on every repetition after the
// first, and its "bandwidth" could exceed what DRAM allows.
//
// For each kernel: the least bytes it must move (every input read once, every output written
// once, an accumulated output read and written), its time (mean of kReps launches after
// kWarmup, CUDA events on the compute stream), the achieved bandwidth bytes / time, and the
// ratio to the copy's bandwidth (2 x bytes copied / time). NMS is timed but not in the ratios:
// its cost is the IoU tests and the host walk, not memory traffic. BatchNorm + SiLU runs in
// every layout and storage (float/bf16, NCHW/NHWC); SiLU and add in float and bf16.
// Without a usable GPU it exits as bench/gpu_bench.h's exit_without_gpu says (77, or 1).
// The last line is machine-readable:
//   RESULT min_bw_ratio=<x> median_bw_ratio=<y>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/gpu_bench.h"               // defines: filled, laid, time_ms, exit_without_gpu
#include "engine/step_scalars.h"           // defines: StepScalars
#include "engine/tensor.h"                 // defines: Tensor
#include "kernels/cuda/cuda_ops.h"         // defines: the CUDA kernels not reached through ops.h
#include "kernels/cuda/runtime/check.h"    // defines: BAREYOLO_CUDA_CHECK
#include "kernels/cuda/runtime/runtime.h"  // defines: device_count, compute_stream
#include "kernels/ops.h"                   // defines: the ops, routed to CUDA for device views
#include "kernels/optim_update.h"          // defines: SgdFactors, EmaFactors
#include "models/eval/detect_cuda.h"       // defines: decode and NMS on the GPU

namespace {

using namespace bareyolo;
using namespace bareyolo::bench;

constexpr int64_t kBatch = 32;  // the batch of the shapes, unless the L2 cache asks for more

// The batch, at least kBatch, at which a tensor of `per_image` floats per image has at least
// `min_bytes`.
int64_t batch_for(int64_t per_image, int64_t min_bytes) {
  const int64_t image_bytes = per_image * int64_t{sizeof(float)};
  return std::max(kBatch, (min_bytes + image_bytes - 1) / image_bytes);
}

struct Row {
  std::string name;
  double bytes, ms;
};

}  // namespace

int main() {
  if (const std::optional<int> status = bench::exit_without_gpu("bench_gpu_kernels"))
    return *status;
  cudaDeviceProp prop{};
  BAREYOLO_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int l2_bytes = 0;
  BAREYOLO_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, 0));
  const int64_t min_bytes = 2 * int64_t{l2_bytes};  // of every tensor a bandwidth is measured on
  const int64_t min_floats = (min_bytes + 3) / 4;
  std::printf(
      "bench_gpu_kernels: %s, yolov5s at 640 x 640, batch %lld or more, float32; L2 %.1f MiB, "
      "so every tensor >= %.1f MiB\n",
      prop.name, (long long)kBatch, l2_bytes / 1048576.0, min_bytes / 1048576.0);

  // The copy reference: 256 MiB device to device, or twice the L2 if that is more.
  const int64_t copy_floats = std::max(int64_t{64} << 20, min_floats);
  Tensor copy_src = filled({1, 1, 1, copy_floats}, 1),
         copy_dst = Tensor::empty({1, 1, 1, copy_floats}, kGpu);
  auto stream = static_cast<cudaStream_t>(cuda::compute_stream(0));
  const double copy_ms = time_ms([&] {
    BAREYOLO_CUDA_CHECK(cudaMemcpyAsync(copy_dst.view<float>().data, copy_src.view<float>().data,
                                        size_t(copy_floats) * 4, cudaMemcpyDeviceToDevice, stream));
  });
  const double copy_gbps = 2.0 * double(copy_floats) * 4 / (copy_ms * 1e6);
  std::printf("device-to-device copy: %.1f GB/s (read + write of %lld MiB in %.3f ms)\n\n",
              copy_gbps, (long long)(copy_floats * 4 >> 20), copy_ms);

  std::vector<Row> rows;
  auto bench = [&](const std::string& name, double bytes, const std::function<void()>& body) {
    rows.push_back({name, bytes, time_ms(body)});
  };
  const double f = 4;  // bytes per float

  {  // SPPF of yolov5s: cv1 gives 256 channels at 20 x 20
    const Shape4 s{batch_for(256 * 20 * 20, min_bytes), 256, 20, 20};
    const double n = double(s.numel());
    const ops::Pool2dParams p{5, 1, 2};
    Tensor x = filled(s, 2), y1 = Tensor::empty(s, kGpu), y2 = Tensor::empty(s, kGpu),
           y3 = Tensor::empty(s, kGpu), dy = filled(s, 3), dx = filled(s, 4);
    bench("maxpool 5x5 fwd " + s.str(), 2 * n * f,
          [&] { ops::maxpool2d_forward<float>(x.view<float>(), p, y1.view<float>()); });
    bench("SPPF 3 pools fused " + s.str(), 4 * n * f, [&] {
      ops::maxpool2d_chain3_forward<float>(x.view<float>(), p, y1.view<float>(), y2.view<float>(),
                                           y3.view<float>());
    });
    bench("maxpool 5x5 bwd " + s.str(), 4 * n * f, [&] {
      ops::maxpool2d_backward<float>(x.view<float>(), dy.view<float>(), p, dx.view<float>());
    });
  }
  for (Shape4 s : {Shape4{0, 256, 20, 20}, Shape4{0, 128, 40, 40}}) {  // the two Upsamples
    s.n = batch_for(s.image_numel(), min_bytes);  // x, the smaller side, sets the batch
    const double n = double(s.numel());
    const Shape4 big{s.n, s.c, 2 * s.h, 2 * s.w};
    Tensor x = filled(s, 5), y = Tensor::empty(big, kGpu), dy = filled(big, 6), dx = filled(s, 7);
    bench("upsample x2 fwd " + s.str(), 5 * n * f,
          [&] { ops::upsample_nearest2x_forward<float>(x.view<float>(), y.view<float>()); });
    bench("upsample x2 bwd " + s.str(), 6 * n * f,
          [&] { ops::upsample_nearest2x_backward<float>(dy.view<float>(), dx.view<float>()); });
  }
  {  // the P3 head output (batch, 3 x 85, 80, 80): the loss's pointwise ops and the decode
    const Shape4 s{batch_for(255 * 80 * 80, min_bytes), 255, 80, 80};
    const double n = double(s.numel());
    Tensor x = filled(s, 8), t = filled(s, 9), out = Tensor::empty(s, kGpu), g = filled(s, 10),
           dx = filled(s, 11);
    bench("sigmoid fwd " + s.str(), 2 * n * f,
          [&] { ops::sigmoid_forward<float>(x.view<float>(), out.view<float>()); });
    bench("BCE-with-logits fwd " + s.str(), 3 * n * f, [&] {
      ops::bce_with_logits_forward<float>(x.view<float>(), t.view<float>(), 1.0f,
                                          out.view<float>());
    });
    bench("BCE-with-logits bwd " + s.str(), 5 * n * f, [&] {
      ops::bce_with_logits_backward<float>(x.view<float>(), t.view<float>(), 1.0f, g.view<float>(),
                                           dx.view<float>());
    });
    models::DecodeLevel level;
    level.stride = 8;
    for (int a = 0; a < 6; ++a) level.anchors_grid[a] = 1.5f + float(a);
    level.rows_per_image = 3 * 80 * 80;
    bench("Detect decode P3 " + s.str(), 2 * n * f,
          [&] { models::decode_level(x.view<float>(), level, out.view<float>()); });
  }
  {  // the stem's activations (batch, 32, 320, 320): SiLU and add
    const Shape4 s{batch_for(32 * 320 * 320, min_bytes), 32, 320, 320};
    const double n = double(s.numel());
    Tensor x = filled(s, 12), y = Tensor::empty(s, kGpu), dy = filled(s, 13), dx = filled(s, 14);
    bench("SiLU fwd " + s.str(), 2 * n * f,
          [&] { ops::silu_forward<float>(x.view<float>(), y.view<float>()); });
    bench("SiLU bwd " + s.str(), 4 * n * f,
          [&] { ops::silu_backward<float>(x.view<float>(), dy.view<float>(), dx.view<float>()); });
    bench("add fwd " + s.str(), 3 * n * f,
          [&] { ops::add_forward<float>(x.view<float>(), dy.view<float>(), y.view<float>()); });
    // The same in bf16 (--amp's activations): 16 bytes a thread are 8 elements.
    const double h = 2;  // bytes per bf16
    Tensor xb = x.converted(DType::bf16), yb = Tensor::empty(s, kGpu, DType::bf16),
           dyb = dy.converted(DType::bf16), dxb = dx.converted(DType::bf16);
    bench("SiLU fwd bf16 " + s.str(), 2 * n * h,
          [&] { ops::silu_forward<bf16>(xb.view<bf16>(), yb.view<bf16>()); });
    bench("SiLU bwd bf16 " + s.str(), 4 * n * h,
          [&] { ops::silu_backward<bf16>(xb.view<bf16>(), dyb.view<bf16>(), dxb.view<bf16>()); });
    bench("add bwd bf16 " + s.str(), 5 * n * h,
          [&] { ops::add_backward<bf16>(dyb.view<bf16>(), dxb.view<bf16>(), yb.view<bf16>()); });
  }
  // BatchNorm + SiLU at the stem's activations, in each layout and storage a run can have: the
  // moments (phase 1 of the training forward), the apply, and the training backward (its
  // reduction and its apply: x and dy read twice, dx written; the least is one read each).
  for (DType dtype : {DType::f32, DType::bf16})
    for (Layout layout : {Layout::nchw, Layout::channels_last}) {
      const Shape4 s{batch_for(32 * 320 * 320, min_bytes), 32, 320, 320};
      const double n = double(s.numel()), e = double(dtype_size(dtype));
      const std::string what = std::string(dtype == DType::bf16 ? " bf16" : " float") +
                               (layout == Layout::channels_last ? " NHWC " : " NCHW ") + s.str();
      const Tensor x = laid(filled(s, 26), dtype, layout), dy = laid(filled(s, 27), dtype, layout);
      Tensor y = Tensor::empty(s, kGpu, dtype, layout), dx = Tensor::empty(s, kGpu, dtype, layout);
      const Tensor gamma = filled({1, 32, 1, 1}, 28), beta = filled({1, 32, 1, 1}, 29);
      Tensor mean = filled({1, 32, 1, 1}, 30), m2 = filled({1, 32, 1, 1}, 31);
      Tensor dgamma = filled({1, 32, 1, 1}, 32), dbeta = filled({1, 32, 1, 1}, 33);
      const float *g = gamma.view<float>().data, *b = beta.view<float>().data;
      float *mu = mean.view<float>().data, *var = m2.view<float>().data;
      const auto bench_batchnorm = [&]<class S>() {
        bench("BN moments" + what, n * e, [&] { ops::batchnorm_moments<S>(x.view<S>(), mu, var); });
        bench("BN+SiLU apply" + what, 2 * n * e,
              [&] { ops::batchnorm_silu_apply<S>(x.view<S>(), mu, var, g, b, y.view<S>()); });
        bench("BN+SiLU bwd train" + what, 3 * n * e, [&] {
          ops::batchnorm_silu_backward_train<S>(x.view<S>(), dy.view<S>(), g, b, mu, var,
                                                dx.view<S>(), dgamma.view<float>().data,
                                                dbeta.view<float>().data);
        });
      };
      if (dtype == DType::bf16)
        bench_batchnorm.template operator()<bf16>();
      else
        bench_batchnorm.template operator()<float>();
    }
  {  // yolov5s's 7,235,389 parameters as one flat buffer, or more to fill twice the L2
    const Shape4 s{1, 1, 1, std::max<int64_t>(7235389, min_floats)};
    const double n = double(s.numel());
    char count[32];
    std::snprintf(count, sizeof count, " (%.1fM params)", n / 1e6);
    Tensor w = filled(s, 15), g = filled(s, 16), v = filled(s, 17), ema = filled(s, 18);
    // Every element in group 1 (the decayed weights): one group index byte per element.
    const Tensor group_of =
        Tensor::from_vector(std::vector<uint8_t>(size_t(s.numel()), 1), s, kGpu);
    Tensor sum = Tensor::empty({1, 1, 1, 1}, kGpu, DType::f64);
    const ops::SgdParams groups[] = {{}, {1e-6, 0.937, 5e-4, true}, {}};
    const double decay[] = {0.9999};
    StepScalars block(kGpu);  // the settings in device memory, as the optimizer keeps them
    const ops::SgdFactors<float>* sgd = block.place<ops::SgdFactors<float>>(groups);
    const ops::EmaFactors<float>* ema_factors = block.place<ops::EmaFactors<float>>(decay);
    bench(std::string("SGD nesterov + decay") + count, (5 * f + 1) * n, [&] {
      ops::sgd_step<float>(w.view<float>(), g.view<float>(), v.view<float>(),
                           group_of.view<uint8_t>(), sgd, 3);
    });
    bench(std::string("EMA update") + count, 3 * n * f,
          [&] { ops::ema_update<float>(ema.view<float>(), w.view<float>(), ema_factors); });
    bench(std::string("sum of squares") + count, n * f,
          [&] { ops::sum_of_squares<float>(g.view<float>(), sum.view<double>()); });
    // 1e30: a norm the gradients never reach, so the factor is 1 and g stays as it is.
    bench(std::string("clip to norm") + count, 2 * n * f,
          [&] { ops::clip_to_norm<float>(g.view<float>(), sum.view<double>(), 1e30); });
    // --amp: the weights' bf16 copies rounded once a step (ParameterArena), and a convolution's
    // bf16 weight-gradient product added into its float gradient (conv2d.cu).
    Tensor w_bf16 = Tensor::empty(s, kGpu, DType::bf16);
    bench(std::string("round weights to bf16") + count, (f + 2) * n,
          [&] { cuda::convert_to_bf16(w.view<float>(), w_bf16.view<bf16>()); });
    bench(std::string("add bf16 into float") + count, (2 * f + 2) * n,
          [&] { cuda::add_bf16_into(w_bf16.view<bf16>(), g.view<float>()); });
  }

  std::printf("%-40s %12s %10s %10s %8s\n", "kernel", "MB moved", "ms", "GB/s", "vs copy");
  std::vector<double> ratios;
  for (const Row& r : rows) {
    const double gbps = r.bytes / (r.ms * 1e6), ratio = gbps / copy_gbps;
    ratios.push_back(ratio);
    std::printf("%-40s %12.1f %10.4f %10.1f %8.2f\n", r.name.c_str(), r.bytes / 1e6, r.ms, gbps,
                ratio);
  }

  {  // NMS at validation's scale: 3000 candidate boxes (IoU tests + host walk; not in ratios)
    const int64_t count = 3000;
    std::vector<float> corners;
    uint32_t state = 7;
    for (int64_t i = 0; i < count; ++i) {
      state = state * 1664525u + 1013904223u;
      const float x = float(state >> 16) / 65536.0f * 600,
                  y = float(state & 0xFFFF) / 65536.0f * 600;
      corners.insert(corners.end(), {x, y, x + 40, y + 30});
    }
    Tensor boxes = Tensor::from_vector(corners, {1, 1, 1, 4 * count}, kGpu);
    const double ms =
        time_ms([&] { (void)cuda::greedy_nms(boxes.view<float>().data, count, 0.45f, 300, 0); });
    std::printf("\nNMS of %lld sorted boxes (bit matrix and walk on the GPU): %.3f ms\n",
                (long long)count, ms);
  }
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  const size_t k = sorted.size();
  const double median = k % 2 ? sorted[k / 2] : 0.5 * (sorted[k / 2 - 1] + sorted[k / 2]);
  std::printf("RESULT min_bw_ratio=%.3f median_bw_ratio=%.3f\n", sorted.front(), median);
  return 0;
}
