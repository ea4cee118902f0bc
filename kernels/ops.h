// kernels/ops.h — every op the detector needs, declared once. Each call runs on the device
// its views live on: kernels/cpu/ holds the reference implementations (float and double, and
// bf16 for the activation ops: see the end of this file), kernels/cuda/ the GPU ones (float, and
// bf16 for the activation ops); each CPU implementation's first statement routes a call on GPU
// views to its CUDA twin (kernels/route.h).
//
// Conventions, the same for every op:
//  - forward ops overwrite their outputs;
//  - backward ops ADD into the gradients they produce (dx += ...). A tensor read by two
//    layers gets both contributions without a temporary, and the caller zeroes a gradient
//    once per step. (Caffe and llm.c overwrite activation gradients instead; accumulating
//    everywhere removes a class of ordering bugs.) The ops that produce a layer input's
//    gradient, convolution and upsampling, take a GradientWrite: given `overwrite` they write
//    dx instead, for the caller that knows it is dx's first and whole contribution, which then
//    needs no zeroing pass before it (and a GPU's dx no read). The fused BatchNorm + SiLU
//    backward ops always write dx (see there);
//  - inputs and outputs must not overlap unless an op says so;
//  - every view of one call lives on the same device; a mismatch throws.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/view.h"

namespace bareyolo::ops {

// How a backward op puts a gradient into dx: added to what dx holds, or written over it.
enum class GradientWrite { add, overwrite };

// ---- elementwise ----------------------------------------------------------------------
// y = x * sigmoid(x)
template <class T>
void silu_forward(View<const T> x, View<T> y);
// dx += dy * sigmoid(x) * (1 + x * (1 - sigmoid(x)))
template <class T>
void silu_backward(View<const T> x, View<const T> dy, View<T> dx);
// y = a + b (y may alias a or b)
template <class T>
void add_forward(View<const T> a, View<const T> b, View<T> y);
// da += dy; db += dy
template <class T>
void add_backward(View<const T> dy, View<T> da, View<T> db);
// y = 1 / (1 + exp(-x))
template <class T>
void sigmoid_forward(View<const T> x, View<T> y);
// dx += dy * y * (1 - y), from the forward output y
template <class T>
void sigmoid_backward(View<const T> y, View<const T> dy, View<T> dx);
// Binary cross-entropy on logits, elementwise, numerically stable for any |x|:
//   loss = -(pos_weight * t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x)))
template <class T>
void bce_with_logits_forward(View<const T> x, View<const T> target, T pos_weight, View<T> loss);
// dx += dloss * ((1 - t) * sigmoid(x) - pos_weight * t * (1 - sigmoid(x)))
template <class T>
void bce_with_logits_backward(View<const T> x, View<const T> target, T pos_weight,
                              View<const T> dloss, View<T> dx);

// ---- shape ops ------------------------------------------------------------------------
// Copies the inputs, in order, into consecutive channel ranges of y.
template <class T>
void concat_forward(const std::vector<View<const T>>& inputs, View<T> y);
// dx[i] += the channel range of dy that input i was copied to.
template <class T>
void concat_backward(View<const T> dy, const std::vector<View<T>>& dx);
// Nearest-neighbour x2: y[n,c,2i+a,2j+b] = x[n,c,i,j]
template <class T>
void upsample_nearest2x_forward(View<const T> x, View<T> y);
// dx[n,c,i,j] += sum over the 2x2 block of dy it was copied to (= with `overwrite`)
template <class T>
void upsample_nearest2x_backward(View<const T> dy, View<T> dx,
                                 GradientWrite write = GradientWrite::add);

struct Pool2dParams {
  int kernel = 5, stride = 1, pad = 2;  // square windows; padding counts as -infinity
};
template <class T>
void maxpool2d_forward(View<const T> x, Pool2dParams p, View<T> y);
// dx += dy routed to the first maximum of each window (row-major order), recomputed from x.
template <class T>
void maxpool2d_backward(View<const T> x, View<const T> dy, Pool2dParams p, View<T> dx);
// SPPF's three chained pools: y1 = pool(x), y2 = pool(y1), y3 = pool(y2), for stride 1 and
// padding (kernel - 1) / 2 (outputs the input's shape). The same as three maxpool2d_forward
// calls; on a GPU one kernel computes all three from one read of x.
template <class T>
void maxpool2d_chain3_forward(View<const T> x, Pool2dParams p, View<T> y1, View<T> y2, View<T> y3);

// ---- layout (kernels/view.h: NCHW and channels last) ------------------------------------
// y = x at every (n, c, h, w), whatever the layout of each (either layout, a channel slice of
// either): how a tensor changes layout (engine/tensor.h). Float, double and bf16; x and y must
// not overlap.
template <class T>
void copy_elements(View<const T> x, View<T> y);

// ---- input images (kernels/input_images.h: the formulas) ------------------------------
// The loader's 8-bit pixels as the model's float input, on the device that trains (the batch
// crosses to it as bytes, a quarter of the floats). x holds n images of h x w pixels of c
// interleaved bytes (channels last, RGB): a view of shape (n, h, w, c). y is NCHW (n, c, h, w):
//   y[n, c, i, j] = x[n, i, j, c] * (1.0f / 255.0f)
void hwc_bytes_to_unit_float(View<const uint8_t> x, View<float> y);
// y = every plane of x resized bilinearly to y's height and width, as PyTorch's
// F.interpolate(mode='bilinear', align_corners=False) computes it (--multi-scale's resize of
// the batch). x and y have the same images and channels; every side is at least 1.
void resize_bilinear(View<const float> x, View<float> y);

// ---- convolution ----------------------------------------------------------------------
// Cross-correlation, groups = 1, dilation = 1. weight is (c_out, c_in, kernel_h, kernel_w)
// in a dense view; bias is c_out values or nullptr.
struct Conv2dParams {
  int stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};
// Output size of one spatial dimension.
inline int64_t conv_out_size(int64_t in, int64_t kernel, int stride, int pad) {
  return (in + 2 * pad - kernel) / stride + 1;
}
// y = conv(x, weight) + bias. Given moments_mean and moments_m2 (c_out values each) it also
// writes batchnorm_moments(y) into them, with the same bits: where the layout allows (the GEMM
// path, an image per task) each image's planes are taken while its output is still in cache,
// which spares ConvBnSilu's BatchNorm two passes over y from memory in training.
template <class T>
void conv2d_forward(View<const T> x, View<const T> weight, const ComputeType<T>* bias,
                    Conv2dParams p, View<T> y, ComputeType<T>* moments_mean = nullptr,
                    ComputeType<T>* moments_m2 = nullptr);
// dx += conv-transpose(dy, weight) (dx = with `overwrite`)
template <class T>
void conv2d_backward_data(View<const T> dy, View<const T> weight, Conv2dParams p, View<T> dx,
                          GradientWrite write = GradientWrite::add);
// dweight += correlate(x, dy); dbias += sum of dy per channel (when dbias != nullptr)
template <class T>
void conv2d_backward_weight(View<const T> x, View<const T> dy, Conv2dParams p,
                            View<ComputeType<T>> dweight, ComputeType<T>* dbias);

// ---- batch normalisation --------------------------------------------------------------
// Training mode normalises by the batch's own statistics: biased variance over (n, h, w)
// per channel. Split in phases so SyncBatchNorm can combine the per-channel partials of
// all ranks between them; the single-process ops below are the phases run back to back.
//
// Phase 1 (forward): per-channel count, mean and M2 = sum((x - mean)^2) of this view.
// (count, mean, M2) triples combine exactly across ranks (Chan's parallel formula), where a
// float sum of squares would lose the variance to cancellation.
template <class T>
void batchnorm_moments(View<const T> x, ComputeType<T>* mean, ComputeType<T>* m2);
// Phase 2 (forward): y = (x - mean) * invstd * gamma + beta.
template <class T>
void batchnorm_apply(View<const T> x, const ComputeType<T>* mean, const ComputeType<T>* invstd,
                     const ComputeType<T>* gamma, const ComputeType<T>* beta, View<T> y);
// Phase 1 (backward): per-channel sum(dy) and sum(dy * (x - mean) * invstd).
template <class T>
void batchnorm_backward_reduce(View<const T> x, View<const T> dy, const ComputeType<T>* mean,
                               const ComputeType<T>* invstd, ComputeType<T>* sum_dy,
                               ComputeType<T>* sum_dy_xhat);
// Phase 2 (backward), with `count` = number of elements per channel over ALL ranks:
//   dx += gamma * invstd * (dy - sum_dy / count - xhat * sum_dy_xhat / count)
template <class T>
void batchnorm_backward_apply(View<const T> x, View<const T> dy, const ComputeType<T>* mean,
                              const ComputeType<T>* invstd, const ComputeType<T>* gamma,
                              const ComputeType<T>* sum_dy, const ComputeType<T>* sum_dy_xhat,
                              int64_t count, View<T> dx);

// No defaults: the model chooses (YOLOv5 sets eps 0.001 and momentum 0.03, models/yolo/).
struct BatchNormParams {
  double eps;       // added to the variance: 1 / sqrt(var + eps)
  double momentum;  // weight of the batch statistic in the running statistics' update
};
// Training-mode forward on one process: phases 1 and 2, and the running statistics update
//   running = (1 - momentum) * running + momentum * batch_stat
// with the UNBIASED batch variance for running_var (as PyTorch does). Saves mean and invstd
// (c values each) for the backward.
template <class T>
void batchnorm_forward_train(View<const T> x, const ComputeType<T>* gamma,
                             const ComputeType<T>* beta, BatchNormParams p,
                             ComputeType<T>* running_mean, ComputeType<T>* running_var,
                             ComputeType<T>* save_mean, ComputeType<T>* save_invstd, View<T> y);
// dx += ..., dgamma += sum(dy * xhat), dbeta += sum(dy)
template <class T>
void batchnorm_backward_train(View<const T> x, View<const T> dy, const ComputeType<T>* gamma,
                              const ComputeType<T>* save_mean, const ComputeType<T>* save_invstd,
                              View<T> dx, ComputeType<T>* dgamma, ComputeType<T>* dbeta);
// Eval mode: y = (x - running_mean) / sqrt(running_var + eps) * gamma + beta
template <class T>
void batchnorm_forward_eval(View<const T> x, const ComputeType<T>* gamma,
                            const ComputeType<T>* beta, const ComputeType<T>* running_mean,
                            const ComputeType<T>* running_var, BatchNormParams p, View<T> y);
// dx += dy * gamma / sqrt(running_var + eps); dgamma += sum(dy * xhat); dbeta += sum(dy)
template <class T>
void batchnorm_backward_eval(View<const T> x, View<const T> dy, const ComputeType<T>* gamma,
                             const ComputeType<T>* running_mean, const ComputeType<T>* running_var,
                             BatchNormParams p, View<T> dx, ComputeType<T>* dgamma,
                             ComputeType<T>* dbeta);

// The halves of the training and evaluation forwards, for the fused ops below:
// batchnorm_forward_train is batchnorm_train_statistics, then batchnorm_apply with save_*;
// batchnorm_forward_eval is batchnorm_apply with running_mean and, per channel,
// invstd = 1 / sqrt(running_var + eps) as batchnorm_running_inverse_std writes it.
template <class T>
void batchnorm_train_statistics(View<const T> x, BatchNormParams p, ComputeType<T>* running_mean,
                                ComputeType<T>* running_var, ComputeType<T>* save_mean,
                                ComputeType<T>* save_invstd);
// batchnorm_train_statistics after its phase 1: from the moments (mean, m2) of `count` >= 2
// values per channel, save_mean = mean (they may be the same buffer), save_invstd and the
// running statistics' update. ConvBnSilu's path, whose convolution gathered the moments
// (conv2d_forward with moments). `device` holds every pointer.
template <class T>
void batchnorm_statistics_from_moments(const T* mean, const T* m2, int64_t channels, int64_t count,
                                       BatchNormParams p, Device device, T* running_mean,
                                       T* running_var, T* save_mean, T* save_invstd);
template <class T>
void batchnorm_running_inverse_std(const T* running_var, int64_t channels, double eps,
                                   Device device, T* invstd);

// ---- SyncBatchNorm's steps between its collectives -------------------------------------
// (engine/distributed/ddp/sync_batchnorm.h.) Every per-channel value stays on `device`, which
// holds every pointer: the ranks exchange double tensors there, and no value visits the host.
//
// Forward, before the all-gather: this rank's record of `count` values per channel, in double:
//   record = [count, mean_0 .. mean_{C-1}, M2_0 .. M2_{C-1}]   (1 + 2 C values)
// from the moments batchnorm_moments wrote (mean, m2: `channels` values each).
template <class T>
void batchnorm_moments_record(const T* mean, const T* m2, int64_t channels, int64_t count,
                              Device device, double* record);
// Forward, after it: the ranks' records (rank r's at records + r * record_stride) merged per
// channel in rank order (kernels/batchnorm_statistics.h: merged_records), then
// batchnorm_statistics_from_moments's finish from the merged moments, the mean rounded to T
// first: save_mean, save_invstd, the running statistics' update. *total_count = the values per
// channel over all ranks (>= 2: the caller checks), for the backward.
template <class T>
void batchnorm_statistics_from_records(const double* records, int64_t ranks, int64_t record_stride,
                                       int64_t channels, BatchNormParams p, Device device,
                                       T* running_mean, T* running_var, T* save_mean,
                                       T* save_invstd, double* total_count);
// Backward, before the all-reduce: this rank's sums (batchnorm_*backward_reduce's) into the
// gradients of gamma and beta (dgamma += sum_dy_xhat, dbeta += sum_dy: the reducer averages
// them over the ranks with every parameter gradient), and widened into
//   record = [sum_dy_0 .. sum_dy_{C-1}, sum_dy_xhat_0 .. sum_dy_xhat_{C-1}]   (2 C values)
template <class T>
void batchnorm_sums_record(const T* sum_dy, const T* sum_dy_xhat, int64_t channels, Device device,
                           T* dgamma, T* dbeta, double* record);
// Backward, after it: the sums over all ranks (the record, summed) per value, in T:
//   mean_dy = T(sum_dy) / T(*total_count),  mean_dy_xhat = T(sum_dy_xhat) / T(*total_count)
// with the count the forward's batchnorm_statistics_from_records left on the device. The apply
// ops (batchnorm_backward_apply, batchnorm_silu_backward_apply) take them as sums of count 1:
// they divide by count in T, and x / 1 is x, so dx has the bits the sums and the count give.
template <class T>
void batchnorm_mean_sums(const double* sums, int64_t channels, const double* total_count,
                         Device device, T* mean_dy, T* mean_dy_xhat);

// ---- fused BatchNorm + SiLU (ConvBnSilu) ----------------------------------------------
// Each is, by definition, the composition of the ops it fuses. The CPU gives the
// composition's exact bits in fewer passes over memory (kernels/cpu/batchnorm_silu.cpp); the
// one-pass CUDA kernels are tested against it:
//   batchnorm_silu_apply:  y = silu_forward(batchnorm_apply(x, mean, invstd, gamma, beta))
//   batchnorm_silu_backward_<op>(x, dy, ...):  batchnorm_backward_<op>(x, dbn, ...) with
//                          dbn = silu_backward(bn, dy), the gradient SiLU passes to BN, and
//                          bn = batchnorm_apply(x, ...) with the statistics the op is given
//                          (the forward's). bn is computed again rather than kept from forward:
//                          one multiply-add per value, against an activation-sized tensor held
//                          for every layer from forward to backward. dbn is never stored either
//                          on the GPU, which computes both inside BN's passes.
// Unlike every other backward op, the fused ones WRITE dx (dx = what the composition would add
// to a zeroed dx), dgamma and dbeta still accumulate: their one caller, ConvBnSilu, hands them
// its own buffer for the convolution's gradient, and writing it saves zeroing it first, a pass
// over an activation-sized tensor per layer (1.1-1.6% of yolov5n's CPU training step).
// SyncBatchNorm's two phases share dx as a workspace: reduce may leave in it what apply reads
// back, so apply must get the dx that reduce got, untouched in between (and the same x, dy and
// statistics). The CPU leaves dbn there, sparing apply an exp and a division per value (its
// two phases cost 1.5-1.7x the one-call op when apply computed dbn again, 1.07-1.1x now); a GPU,
// memory-bound here, computes dbn again, which costs less than storing it and reading it back.
template <class T>
void batchnorm_silu_apply(View<const T> x, const ComputeType<T>* mean, const ComputeType<T>* invstd,
                          const ComputeType<T>* gamma, const ComputeType<T>* beta, View<T> y);
template <class T>
void batchnorm_silu_backward_reduce(View<const T> x, View<const T> dy, const ComputeType<T>* mean,
                                    const ComputeType<T>* invstd, const ComputeType<T>* gamma,
                                    const ComputeType<T>* beta, ComputeType<T>* sum_dy,
                                    ComputeType<T>* sum_dy_xhat, View<T> dx);
template <class T>
void batchnorm_silu_backward_apply(View<const T> x, View<const T> dy, const ComputeType<T>* mean,
                                   const ComputeType<T>* invstd, const ComputeType<T>* gamma,
                                   const ComputeType<T>* beta, const ComputeType<T>* sum_dy,
                                   const ComputeType<T>* sum_dy_xhat, int64_t count, View<T> dx);
template <class T>
void batchnorm_silu_backward_train(View<const T> x, View<const T> dy, const ComputeType<T>* gamma,
                                   const ComputeType<T>* beta, const ComputeType<T>* save_mean,
                                   const ComputeType<T>* save_invstd, View<T> dx,
                                   ComputeType<T>* dgamma, ComputeType<T>* dbeta);
template <class T>
void batchnorm_silu_backward_eval(View<const T> x, View<const T> dy, const ComputeType<T>* gamma,
                                  const ComputeType<T>* beta, const ComputeType<T>* running_mean,
                                  const ComputeType<T>* running_var, BatchNormParams p, View<T> dx,
                                  ComputeType<T>* dgamma, ComputeType<T>* dbeta);

// ---- optimizer ------------------------------------------------------------------------
// These work on flat buffers (views of shape (1, 1, 1, count)): a whole parameter arena in one
// pass (engine/parameter_arena.h). They update in place, so the accumulate convention does
// not apply. The update ops take each element's parameter group: element i is updated with
// groups[group_of[i]] (every group_of[i] < group_count <= kMaxParameterGroups).
//
// Their settings arrive as factors already rounded to T (SgdFactors<T>::of(SgdParams) and the
// like: kernels/optim_update.h) in memory on the buffers' device, which the kernel reads when it
// runs: the numbers that change every step are then not part of the launch, so a CUDA graph
// replays a step with the settings that memory holds (engine/step_scalars.h keeps them).
inline constexpr int kMaxParameterGroups = 4;
template <class T>
struct SgdFactors;
template <class T>
struct AdamFactors;
template <class T>
struct EmaFactors;
struct SgdParams {
  double lr = 0.01, momentum = 0.937, weight_decay = 0.0;
  bool nesterov = true;
};
// PyTorch's SGD (dampening 0), with `velocity` starting at zero:
//   g = grad + weight_decay * param;  velocity = momentum * velocity + g
//   param -= lr * (nesterov ? g + momentum * velocity : velocity)
template <class T>
void sgd_step(View<T> param, View<const T> grad, View<T> velocity, View<const uint8_t> group_of,
              const SgdFactors<T>* groups, int group_count);
// PyTorch's Adam and AdamW (amsgrad off); `step` counts updates including this one (1 on the
// first). They differ in the weight decay only: Adam's is L2, added to the gradient; AdamW's
// is decoupled, a shrink of the parameter:
//   Adam:  grad += weight_decay * param       AdamW:  param *= 1 - lr * weight_decay
//   exp_avg = beta1 * exp_avg + (1 - beta1) * grad
//   exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad^2
//   param -= lr / (1 - beta1^step) * exp_avg / (sqrt(exp_avg_sq / (1 - beta2^step)) + eps)
struct AdamParams {
  double lr = 0.001, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  int64_t step = 1;
  bool decoupled_weight_decay = true;  // AdamW; false: Adam
};
template <class T>
void adam_step(View<T> param, View<const T> grad, View<T> exp_avg, View<T> exp_avg_sq,
               View<const uint8_t> group_of, const AdamFactors<T>* groups, int group_count);
// Exponential moving average of weights: average = decay * average + (1 - decay) * value, the
// factors (EmaFactors<T>::of(decay)) on the buffers' device.
template <class T>
void ema_update(View<T> average, View<const T> value, const EmaFactors<T>* factors);
// result[0] = the sum of squares of x's elements (double accumulation, a fixed order for a
// given view on a device): `result` is one double on x's device, so on a GPU the sum never
// visits the host.
template <class T>
void sum_of_squares(View<const T> x, View<double> result);
// Gradient-norm clipping's second half (PyTorch's clip_grad_norm_): with norm = sqrt(result
// of sum_of_squares), x *= max_norm / (norm + 1e-6) when that factor is below 1. The factor is
// computed where x lives: no host round trip.
template <class T>
void clip_to_norm(View<T> x, View<const double> sum_of_squares, double max_norm);

// ---- bfloat16 (kernels/bf16.h) ---------------------------------------------------------
// Float only: bf16 is a storage format, its arithmetic runs in float.
// y = x rounded to the nearest bf16 (ties to even)
void convert_to_bf16(View<const float> x, View<bf16> y);
// y = x / divisor in float (divisor 1: exact, every bf16 is a float)
void convert_from_bf16(View<const bf16> x, View<float> y, float divisor = 1.0f);
// x = x rounded to the nearest bf16, kept in float: the value a bf16 tensor would hold.
void round_to_bf16_in_place(View<float> x);
// Mixed precision's bf16 weights, once per optimizer step: copies[e] = bf16(values[source]) for
// every element e of two flat views of one size, source = krsc_source(segments, e)
// (kernels/krsc_weights.h): the copies of a channels-last graph's convolution weights KRSC.
// `segments` (kSegmentFields int64 each, sorted by offset) on the views' device.
void round_weights_to_bf16(View<const float> values, View<bf16> copies,
                           View<const int64_t> segments);
//
// The activation ops (elementwise SiLU and add, concat, upsample, pooling, convolution,
// BatchNorm and BatchNorm + SiLU) also run on bf16 views: mixed precision's activations and
// their gradients, with every per-channel value in float (ComputeType<bf16>). By definition —
// what the CPU runs, kernels/cpu/bf16_ops.cpp — each is its float op on the widened operands,
// with every result rounded to bf16 where it is stored. So a backward op adding into a bf16
// gradient stores round(dx + contribution), and for the convolutions:
//   conv2d_forward<bf16>:          y = round(conv(x, weight) + bias), weight a bf16 copy of the
//                                  float master; its moments are those of the stored y
//   conv2d_backward_weight<bf16>:  dweight += round(correlate(x, dy)) into the float dweight,
//                                  the bf16 product a tensor-core convolution gives
// A GPU computes them in float in another order (cuDNN's convolutions on the tensor cores), so
// its results agree with the CPU's within a bf16 rounding.
}  // namespace bareyolo::ops
