// bench/gpu_convolutions.cpp — bench_gpu_convolutions: yolov5s's convolutions at 640 x 640,
// batch 32, on a GPU, three ways:
//   - float32 through cuDNN against the hand-written im2col + cuBLAS path (forward,
//     backward-data, backward-weight together), the path BAREYOLO_CONV=gemm takes;
//   - bf16 through cuDNN (--amp's tensor-op math) in NCHW against channels last (NHWC
//     activations, KRSC weights): what --channels-last gains per layer;
//   - the two that read a channel slice of a channels-last Concat straight to cuDNN against
//     the packed copies conv2d.cu gives cuDNN today, their results compared (below).
// The convolutions are compute-bound, so unlike bench_gpu_kernels' tensors theirs need not
// outgrow the L2 cache. Without a usable GPU it exits as bench/gpu_bench.h's exit_without_gpu
// says (77, or 1). The last line is machine-readable:
//   RESULT im2col_vs_cudnn=<gemm ms / cuDNN ms> nchw_vs_nhwc_bf16=<NCHW ms / NHWC ms>
//          concat_slices=<n> concat_slices_agreeing=<k> slice_copies_vs_direct=<r>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "bench/gpu_bench.h"            // defines: filled, laid, time_ms, exit_without_gpu
#include "engine/tensor.h"              // defines: Tensor
#include "kernels/cuda/conv2d_paths.h"  // defines: cudnn_conv2d_* (a slice's direct run)
#include "kernels/cuda/cuda_ops.h"      // defines: set_conv_path, add_bf16_into
#include "kernels/ops.h"                // defines: the convolutions, routed to CUDA

namespace {

using namespace bareyolo;
using namespace bareyolo::bench;

constexpr int64_t kBatch = 32;

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

// Forward + backward-data + backward-weight of one convolution at batch kBatch through the path
// cuda::set_conv_path chose, in storage S (bf16: --amp's tensor-op math) with activations and
// weight in `layout` (channels last: NHWC activations, the weight KRSC, as a channels-last graph
// keeps its bf16 weights); the weight gradient float, as the arena keeps it.
template <class S>
double conv_step_ms(const ConvShape& c, Layout layout) {
  // YOLOv5's padding: kernel / 2, except the stem's 6x6, which is given 2.
  const int pad = int(c.kernel / 2) - (c.kernel % 2 == 0 ? 1 : 0);
  const ops::Conv2dParams p{int(c.stride), int(c.stride), pad, pad};
  const int64_t out = ops::conv_out_size(c.in_size, c.kernel, p.stride_h, p.pad_h);
  const DType dtype = std::is_same_v<S, bf16> ? DType::bf16 : DType::f32;
  const Tensor x = laid(filled({kBatch, c.c_in, c.in_size, c.in_size}, 21), dtype, layout);
  Tensor dx = laid(filled(x.shape(), 22), dtype, layout);
  const Tensor w = laid(filled({c.c_out, c.c_in, c.kernel, c.kernel}, 23), dtype, layout);
  Tensor dw = filled(w.shape(), 24);
  Tensor y = Tensor::empty({kBatch, c.c_out, out, out}, kGpu, dtype, layout);
  const Tensor dy = laid(filled(y.shape(), 25), dtype, layout);
  return time_ms(
      [&] {
        ops::conv2d_forward<S>(x.view<S>(), w.view<S>(), nullptr, p, y.view<S>());
        ops::conv2d_backward_data<S>(dy.view<S>(), w.view<S>(), p, dx.view<S>());
        ops::conv2d_backward_weight<S>(x.view<S>(), dy.view<S>(), p, dw.view<float>(), nullptr);
      },
      5);
}

// conv_step_ms, or none where the step threw (cuDNN refusing the shape, say: printed, and
// counted in `refusals`) while the device stayed usable, so that one refused row leaves the
// rest of the bench to run; a fault in a kernel leaves the device unusable and ends the bench.
int refusals = 0;
template <class S>
std::optional<double> conv_step_ms_unless_refused(const ConvShape& c, Layout layout) {
  try {
    return conv_step_ms<S>(c, layout);
  } catch (const std::exception& error) {
    if (cudaDeviceSynchronize() != cudaSuccess) throw;
    ++refusals;
    std::printf("%-32s %s %s refused: %s\n", c.name, std::is_same_v<S, bf16> ? "bf16" : "float",
                layout_name(layout), error.what());
    return std::nullopt;
  }
}

// One table of kYolov5sConvs: a row per convolution with its step's milliseconds one way
// (`first`) and another (`second`) and their ratio (second / first, or first / second with
// `first_over_second`), then the totals of the rows both ran. Returns the totals' ratio, or 0
// where no row ran both.
double compare_table(const char* title, const char* first_name, const char* second_name,
                     const char* ratio_name, bool first_over_second,
                     const std::function<std::optional<double>(const ConvShape&)>& first,
                     const std::function<std::optional<double>(const ConvShape&)>& second) {
  auto ratio = [&](double a, double b) { return first_over_second ? a / b : b / a; };
  std::printf("%-32s %12s %12s %10s\n", title, first_name, second_name, ratio_name);
  double first_total = 0, second_total = 0;
  for (const ConvShape& c : kYolov5sConvs) {
    const std::optional<double> a = first(c), b = second(c);
    if (!a || !b) continue;  // the totals compare rows both ran
    first_total += *a;
    second_total += *b;
    std::printf("%-32s %12.3f %12.3f %10.2f\n", c.name, *a, *b, ratio(*a, *b));
  }
  std::printf("%-32s %12.3f %12.3f %10.2f\n", "total", first_total, second_total,
              ratio(first_total, second_total));
  return first_total > 0 && second_total > 0 ? ratio(first_total, second_total) : 0.0;
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

}  // namespace

int main() {
  if (const std::optional<int> status = bench::exit_without_gpu("bench_gpu_convolutions"))
    return *status;
  cudaDeviceProp prop{};
  BAREYOLO_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("bench_gpu_convolutions: %s, yolov5s's convolutions at 640 x 640, batch %lld\n\n",
              prop.name, (long long)kBatch);
  const double im2col_vs_cudnn = compare_table(
      "conv2d fwd+bwd, batch 32", "cuDNN ms", "im2col ms", "im2col/cuDNN", false,
      [](const ConvShape& c) {
        cuda::set_conv_path(cuda::ConvPath::cudnn);
        return conv_step_ms_unless_refused<float>(c, Layout::nchw);
      },
      [](const ConvShape& c) {
        cuda::set_conv_path(cuda::ConvPath::gemm);
        return conv_step_ms_unless_refused<float>(c, Layout::nchw);
      });
  cuda::set_conv_path(cuda::ConvPath::cudnn);
  // The same convolutions as --amp runs them, in NCHW and in channels last (cuDNN's NHWC
  // tensor-core kernels): what --channels-last gains per layer.
  std::printf("\n");
  const double nchw_vs_nhwc = compare_table(
      "conv2d fwd+bwd bf16, batch 32", "NCHW ms", "NHWC ms", "NCHW/NHWC", true,
      [](const ConvShape& c) { return conv_step_ms_unless_refused<bf16>(c, Layout::nchw); },
      [](const ConvShape& c) {
        return conv_step_ms_unless_refused<bf16>(c, Layout::channels_last);
      });

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

  // slice_copies_vs_direct: the time through copies over straight, of the slices cuDNN took
  // (above 1, with every slice agreeing: the copies could go); 0 where it took none.
  // refused_rows: the convolution rows (above) that threw; the ratios are over the others.
  std::printf(
      "RESULT im2col_vs_cudnn=%.3f nchw_vs_nhwc_bf16=%.3f concat_slices=%zu "
      "concat_slices_agreeing=%d slice_copies_vs_direct=%.3f refused_rows=%d\n",
      im2col_vs_cudnn, nchw_vs_nhwc, std::size(kConcatSlices), slices_agreeing,
      direct_total > 0 ? copies_total / direct_total : 0.0, refusals);
  return 0;
}
