// bench/gpu_kernels.cpp — bench_gpu_kernels: the hand-written memory-bound CUDA kernels at the
// shapes of yolov5s at 640 x 640, batch 32, against a device-to-device cudaMemcpy measured in
// the same run (the practical bandwidth limit of this GPU).
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
// its cost is the IoU tests and the host walk, not memory traffic. Then yolov5s's convolutions
// (forward, backward-data, backward-weight) through cuDNN and through the hand-written
// im2col + cuBLAS path, side by side, and in bf16 through cuDNN in NCHW and in channels last;
// then whether cuDNN takes a channels-last Concat's channel slice as it is (and how fast).
// BatchNorm + SiLU runs in every layout and storage (float/bf16, NCHW/NHWC); SiLU and add in
// float and bf16.
// Without a usable GPU it prints why and exits 77 (skipped), or 1 where a GPU is required
// (cuda::gpu_required: BAREYOLO_REQUIRE_GPU, or a driver installed), so that a broken driver or
// library never reads as skipped.
// The last line is machine-readable:
//   RESULT min_bw_ratio=<x> median_bw_ratio=<y> concat_slices=<n> concat_slices_agreeing=<k>
//          slice_copies_vs_direct=<r>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "engine/step_scalars.h"           // defines: StepScalars
#include "engine/tensor.h"                 // defines: Tensor
#include "kernels/cuda/conv2d_paths.h"     // defines: cudnn_conv2d_* (the slice's direct run)
#include "kernels/cuda/cuda_ops.h"         // defines: the CUDA kernels not reached through ops.h
#include "kernels/cuda/runtime/check.h"    // defines: BAREYOLO_CUDA_CHECK
#include "kernels/cuda/runtime/runtime.h"  // defines: device_count, compute_stream
#include "kernels/ops.h"                   // defines: the ops, routed to CUDA for device views
#include "kernels/optim_update.h"          // defines: SgdFactors, EmaFactors
#include "models/eval/detect_cuda.h"       // defines: decode and NMS on the GPU

namespace {

using namespace bareyolo;

constexpr int kWarmup = 3, kReps = 20;
constexpr int64_t kBatch = 32;  // the batch of the shapes, unless the L2 cache asks for more
const Device kGpu = Device::cuda(0);

// The batch, at least kBatch, at which a tensor of `per_image` floats per image has at least
// `min_bytes`.
int64_t batch_for(int64_t per_image, int64_t min_bytes) {
  const int64_t image_bytes = per_image * int64_t{sizeof(float)};
  return std::max(kBatch, (min_bytes + image_bytes - 1) / image_bytes);
}

// Values in [-2, 2) from a cheap generator (the bench needs finite, varied data, not quality).
Tensor filled(Shape4 shape, uint32_t seed) {
  std::vector<float> values(size_t(shape.numel()));
  uint32_t state = seed * 2654435761u + 1;
  for (float& v : values) {
    state = state * 1664525u + 1013904223u;
    v = float(state >> 8) / float(1 << 24) * 4.0f - 2.0f;
  }
  return Tensor::from_vector(values, shape, kGpu);
}

// Mean milliseconds of one call of `body` on the compute stream.
double time_ms(const std::function<void()>& body, int reps = kReps) {
  auto stream = static_cast<cudaStream_t>(cuda::compute_stream(0));
  for (int i = 0; i < kWarmup; ++i) body();
  cudaEvent_t start, stop;
  BAREYOLO_CUDA_CHECK(cudaEventCreate(&start));
  BAREYOLO_CUDA_CHECK(cudaEventCreate(&stop));
  BAREYOLO_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < reps; ++i) body();
  BAREYOLO_CUDA_CHECK(cudaEventRecord(stop, stream));
  BAREYOLO_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  BAREYOLO_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return double(ms) / reps;
}

struct ConvShape {
  const char* name;
  int64_t c_in, c_out, kernel, stride, in_size;
};
// yolov5s at 640: the stem, the strided convs and one C3 3x3 conv per scale, and SPPF's cv2.
const ConvShape kYolov5sConvs[] = {
    {"L0 6x6 s2 3->32 @640", 3, 32, 6, 2, 640},
    {"L1 3x3 s2 32->64 @320", 32, 64, 3, 2, 320},
    {"C3 1x1 64->32 @160", 64, 32, 1, 1, 160},
    {"C3 3x3 32->32 @160", 32, 32, 3, 1, 160},
    {"L3 3x3 s2 64->128 @160", 64, 128, 3, 2, 160},
    {"C3 3x3 64->64 @80", 64, 64, 3, 1, 80},
    {"L5 3x3 s2 128->256 @80", 128, 256, 3, 2, 80},
    {"C3 3x3 128->128 @40", 128, 128, 3, 1, 40},
    {"L7 3x3 s2 256->512 @40", 256, 512, 3, 2, 40},
    {"C3 3x3 256->256 @20", 256, 256, 3, 1, 20},
    {"SPPF cv2 1x1 1024->512 @20", 1024, 512, 1, 1, 20},
};

// Forward + backward-data + backward-weight of one convolution at batch kBatch, through `path`
// (compute-bound: no L2 rule).
double conv_step_ms(const ConvShape& c, cuda::ConvPath path) {
  // YOLOv5's padding: kernel / 2, except the stem's 6x6, which is given 2.
  const int pad = int(c.kernel / 2) - (c.kernel % 2 == 0 ? 1 : 0);
  const ops::Conv2dParams p{int(c.stride), int(c.stride), pad, pad};
  const int64_t out = ops::conv_out_size(c.in_size, c.kernel, p.stride_h, p.pad_h);
  Tensor x = filled({kBatch, c.c_in, c.in_size, c.in_size}, 21), dx = filled(x.shape(), 22);
  Tensor w = filled({c.c_out, c.c_in, c.kernel, c.kernel}, 23), dw = filled(w.shape(), 24);
  Tensor y = Tensor::empty({kBatch, c.c_out, out, out}, kGpu), dy = filled(y.shape(), 25);
  cuda::set_conv_path(path);
  return time_ms(
      [&] {
        ops::conv2d_forward<float>(x.view<float>(), w.view<float>(), nullptr, p, y.view<float>());
        ops::conv2d_backward_data<float>(dy.view<float>(), w.view<float>(), p, dx.view<float>());
        ops::conv2d_backward_weight<float>(x.view<float>(), dy.view<float>(), p, dw.view<float>(),
                                           nullptr);
      },
      5);
}

// `values` in `dtype` storage and `layout` on the GPU.
Tensor laid(const Tensor& values, DType dtype, Layout layout) {
  Tensor t = Tensor::empty(values.shape(), kGpu, dtype, layout);
  t.convert_from(values);
  return t;
}

// The same three passes in bf16 (--amp: cuDNN's tensor-op math), activations and weight in
// `layout` (channels last: NHWC activations, the weight KRSC, as a channels-last graph keeps its
// bf16 weights); the weight gradient float, as the arena keeps it.
double conv_step_bf16_ms(const ConvShape& c, Layout layout) {
  const int pad = int(c.kernel / 2) - (c.kernel % 2 == 0 ? 1 : 0);
  const ops::Conv2dParams p{int(c.stride), int(c.stride), pad, pad};
  const int64_t out = ops::conv_out_size(c.in_size, c.kernel, p.stride_h, p.pad_h);
  const Tensor x = laid(filled({kBatch, c.c_in, c.in_size, c.in_size}, 21), DType::bf16, layout);
  Tensor dx = laid(filled(x.shape(), 22), DType::bf16, layout);
  const Tensor w = laid(filled({c.c_out, c.c_in, c.kernel, c.kernel}, 23), DType::bf16, layout);
  Tensor dw = filled(w.shape(), 24);
  Tensor y = Tensor::empty({kBatch, c.c_out, out, out}, kGpu, DType::bf16, layout);
  const Tensor dy = laid(filled(y.shape(), 25), DType::bf16, layout);
  return time_ms(
      [&] {
        ops::conv2d_forward<bf16>(x.view<bf16>(), w.view<bf16>(), nullptr, p, y.view<bf16>());
        ops::conv2d_backward_data<bf16>(dy.view<bf16>(), w.view<bf16>(), p, dx.view<bf16>());
        ops::conv2d_backward_weight<bf16>(x.view<bf16>(), dy.view<bf16>(), p, dw.view<float>(),
                                          nullptr);
      },
      5);
}

// A channels-last Concat's channel slice (its pixel stride is the Concat's channels, beyond its
// own) read by the next convolution: yolov5s's layers 5 and 7 read layers 4 and 6, whose
// outputs live in the neck's Concats. conv2d.cu hands cuDNN packed copies of such a slice, as
// whether cuDNN's NHWC kernels take its strides is for a GPU to show; this shows it. The three
// bf16 passes (dx written into the slice, the weight product added to a float gradient) run
// through the ops (copies) and straight to cuDNN on the slice: first once each, compared, then
// timed.
struct ConcatSlice {
  const char* name;
  int64_t c_in, concat_c, c_out, in_size;  // a 3x3 stride-2 conv of the Concat's last c_in
};
const ConcatSlice kConcatSlices[] = {
    {"L5 3x3 s2 128->256 @80 of 256", 128, 256, 256, 80},
    {"L7 3x3 s2 256->512 @40 of 512", 256, 512, 512, 40},
};
// Straight on the slice agrees with the copies when each pass's largest difference is within
// this fraction of its largest value (bf16 results; cuDNN may pick other algorithms for the
// two layouts, which sum in other orders).
constexpr double kSliceTolerance = 1e-2;

// The largest |a - b| over |a|'s largest, as a fraction; infinity where either has a value
// that is not finite (an element one path never wrote, say).
double relative_difference(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.converted(DType::f32).to_vector<float>();
  const std::vector<float> y = b.converted(DType::f32).to_vector<float>();
  double difference = 0, largest = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) return INFINITY;
    difference = std::max(difference, double(std::abs(x[i] - y[i])));
    largest = std::max(largest, double(std::abs(x[i])));
  }
  return largest > 0 ? difference / largest : difference;
}

struct SliceRun {
  double through_copies_ms = 0, direct_ms = 0;
  double forward = 0, data = 0, weight = 0;  // relative_difference of y, dConcat, dweight
  std::string refused;                       // cuDNN's refusal of the slice, if it refused
  bool agrees() const {
    return refused.empty() && forward <= kSliceTolerance && data <= kSliceTolerance &&
           weight <= kSliceTolerance;
  }
};

SliceRun run_concat_slice(const ConcatSlice& s) {
  const ops::Conv2dParams p{2, 2, 1, 1};
  const int64_t out = ops::conv_out_size(s.in_size, 3, p.stride_h, p.pad_h);
  const Shape4 concat_shape{kBatch, s.concat_c, s.in_size, s.in_size};
  const Shape4 y_shape{kBatch, s.c_out, out, out};
  auto nhwc_bf16 = [](const Tensor& values) {
    return laid(values, DType::bf16, Layout::channels_last);
  };
  // Inputs shared by both paths; each path its own outputs. dx is the slice of a whole
  // dConcat, so a write outside the slice shows in the comparison of the two.
  const Tensor concat = nhwc_bf16(filled(concat_shape, 31));
  const Tensor x = concat.channels(s.concat_c - s.c_in, s.concat_c);
  const Tensor w = nhwc_bf16(filled({s.c_out, s.c_in, 3, 3}, 33));  // KRSC
  const Tensor dy = nhwc_bf16(filled(y_shape, 35));
  struct Outputs {
    Tensor y, dconcat, dweight;
  };
  auto outputs = [&] {
    return Outputs{Tensor::empty(y_shape, kGpu, DType::bf16, Layout::channels_last),
                   nhwc_bf16(filled(concat_shape, 32)), Tensor::zeros(w.shape(), kGpu)};
  };
  Outputs copies = outputs(), direct = outputs();
  Tensor product = Tensor::empty(w.shape(), kGpu, DType::bf16, Layout::channels_last);
  auto through_copies = [&] {
    Tensor dx = copies.dconcat.channels(s.concat_c - s.c_in, s.concat_c);
    ops::conv2d_forward<bf16>(x.view<bf16>(), w.view<bf16>(), nullptr, p, copies.y.view<bf16>());
    ops::conv2d_backward_data<bf16>(dy.view<bf16>(), w.view<bf16>(), p, dx.view<bf16>(),
                                    ops::GradientWrite::overwrite);
    ops::conv2d_backward_weight<bf16>(x.view<bf16>(), dy.view<bf16>(), p,
                                      copies.dweight.view<float>(), nullptr);
  };
  auto straight = [&] {  // what conv2d.cu would run if it gave cuDNN the slice
    Tensor dx = direct.dconcat.channels(s.concat_c - s.c_in, s.concat_c);
    cuda::cudnn_conv2d_forward(x.view<bf16>(), w.view<bf16>(), nullptr, p, direct.y.view<bf16>());
    cuda::cudnn_conv2d_backward_data(dy.view<bf16>(), w.view<bf16>(), p, dx.view<bf16>(),
                                     ops::GradientWrite::overwrite);
    cuda::cudnn_conv2d_weight_product(x.view<bf16>(), dy.view<bf16>(), p, product.view<bf16>());
    cuda::add_bf16_into(product.view<bf16>(), direct.dweight.view<float>());
  };

  SliceRun run;
  through_copies();
  try {
    straight();
    BAREYOLO_CUDA_CHECK(cudaDeviceSynchronize());
  } catch (const std::exception& error) {
    // A refusal leaves the device usable; a fault in a kernel does not, and ends the bench.
    if (cudaDeviceSynchronize() != cudaSuccess) throw;
    run.refused = error.what();
    return run;
  }
  run.forward = relative_difference(copies.y, direct.y);
  run.data = relative_difference(copies.dconcat, direct.dconcat);
  run.weight = relative_difference(copies.dweight, direct.dweight);
  run.through_copies_ms = time_ms(through_copies, 5);
  run.direct_ms = time_ms(straight, 5);
  return run;
}

struct Row {
  std::string name;
  double bytes, ms;
};

}  // namespace

int main() {
  if (cuda::device_count() == 0) {
    if (cuda::gpu_required()) {
      std::fprintf(stderr,
                   "bench_gpu_kernels: FAILED: a GPU is required here (%s), but none is usable: "
                   "%s\n",
                   cuda::gpu_required_reason().c_str(), cuda::unavailable_reason().c_str());
      return 1;
    }
    std::printf("skipped: bench_gpu_kernels needs a GPU: %s\n", cuda::unavailable_reason().c_str());
    return 77;
  }
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
  std::printf("\n%-32s %12s %12s %10s\n", "conv2d fwd+bwd, batch 32", "cuDNN ms", "im2col ms",
              "im2col/cuDNN");
  double cudnn_total = 0, gemm_total = 0;
  for (const ConvShape& c : kYolov5sConvs) {
    const double cudnn = conv_step_ms(c, cuda::ConvPath::cudnn);
    const double gemm = conv_step_ms(c, cuda::ConvPath::gemm);
    cudnn_total += cudnn;
    gemm_total += gemm;
    std::printf("%-32s %12.3f %12.3f %10.2f\n", c.name, cudnn, gemm, gemm / cudnn);
  }
  std::printf("%-32s %12.3f %12.3f %10.2f\n", "total", cudnn_total, gemm_total,
              gemm_total / cudnn_total);
  cuda::set_conv_path(cuda::ConvPath::cudnn);
  // The same convolutions as --amp runs them, in NCHW and in channels last (cuDNN's NHWC
  // tensor-core kernels): what --channels-last gains per layer.
  std::printf("\n%-32s %12s %12s %10s\n", "conv2d fwd+bwd bf16, batch 32", "NCHW ms", "NHWC ms",
              "NCHW/NHWC");
  double nchw_total = 0, nhwc_total = 0;
  for (const ConvShape& c : kYolov5sConvs) {
    const double nchw = conv_step_bf16_ms(c, Layout::nchw);
    const double nhwc = conv_step_bf16_ms(c, Layout::channels_last);
    nchw_total += nchw;
    nhwc_total += nhwc;
    std::printf("%-32s %12.3f %12.3f %10.2f\n", c.name, nchw, nhwc, nchw / nhwc);
  }
  std::printf("%-32s %12.3f %12.3f %10.2f\n", "total", nchw_total, nhwc_total,
              nchw_total / nhwc_total);

  std::printf("\n%-32s %12s %12s %12s  %s\n", "bf16 NHWC on a Concat's slice", "copies ms",
              "direct ms", "copies/direct", "cuDNN straight on the slice");
  int slices_agreeing = 0;
  double copies_total = 0, direct_total = 0;
  for (const ConcatSlice& s : kConcatSlices) {
    const SliceRun run = run_concat_slice(s);
    if (!run.refused.empty()) {
      std::printf("%-32s %12s %12s %12s  refused: %s\n", s.name, "-", "-", "-",
                  run.refused.c_str());
      continue;
    }
    slices_agreeing += run.agrees() ? 1 : 0;
    copies_total += run.through_copies_ms;
    direct_total += run.direct_ms;
    std::printf("%-32s %12.3f %12.3f %12.2f  %s: differences y %.2g, dx %.2g, dw %.2g\n", s.name,
                run.through_copies_ms, run.direct_ms, run.through_copies_ms / run.direct_ms,
                run.agrees() ? "agrees" : "DISAGREES", run.forward, run.data, run.weight);
  }

  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  const size_t k = sorted.size();
  const double median = k % 2 ? sorted[k / 2] : 0.5 * (sorted[k / 2 - 1] + sorted[k / 2]);
  // concat_slices_agreeing of concat_slices: those cuDNN took as they are, with the copies'
  // results; slice_copies_vs_direct: the time through copies over straight, of those it took
  // (above 1, with every slice agreeing: the copies could go), 0 when it took none.
  std::printf(
      "RESULT min_bw_ratio=%.3f median_bw_ratio=%.3f concat_slices=%zu concat_slices_agreeing=%d "
      "slice_copies_vs_direct=%.3f\n",
      sorted.front(), median, std::size(kConcatSlices), slices_agreeing,
      direct_total > 0 ? copies_total / direct_total : 0.0);
  return 0;
}
