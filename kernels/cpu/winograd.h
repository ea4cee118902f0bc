// kernels/cpu/winograd.h — Winograd F(2x2, 3x3): the 3x3 stride-1 convolutions (forward, data
// gradient, weight gradient) with 2.25x fewer multiplications than im2col + GEMM.
//
// In one dimension F(2,3) gives two outputs of a 3-tap correlation of four inputs d with four
// multiplications instead of six: y = A^T [(G g) ⊙ (B^T d)], where
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  G = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1],
//   A^T = [1 1 1 0; 0 1 -1 -1].
// Nested in two dimensions, the 2x2 output tile of one (c_out, c_in) pair is A^T [U ⊙ V] A with
// U = G g G^T (the filter's 4x4 transform) and V = B^T d B (d: the 4x4 input tile whose corner
// is at twice the tile's index minus the padding). Summed over c_in, each of the 16 positions
// ξ of the 4x4 transforms is one GEMM over all tiles of an image:
//   M_ξ (c_out x tiles) = U_ξ (c_out x c_in) * V_ξ (c_in x tiles),  then  Y_tile = A^T M A,
// that is 16 multiply-adds per (c_out, c_in, tile) where the direct convolution needs 36.
//
// The two backward passes are the same pieces rearranged:
//  - the data gradient of a 3x3 stride-1 correlation with padding p is the correlation of dY
//    with the kernel flipped in both axes and c_in and c_out swapped, with padding 2 - p: a
//    forward pass with other filters (transform_filters' for_data_gradient);
//  - the weight gradient is the forward's transpose in g: with dM = A dY_tile A^T,
//    dU_ξ (c_out x c_in) = sum over tiles of dM_ξ * V_ξ^T, and dg = G^T dU G.
//
// Accuracy: the transforms only add and halve, so the float error stays near the direct
// convolution's (tests/unit/winograd.cpp measures both against double and bounds the ratio).
//
// This file runs each pass over a whole batch; kernels/cpu/conv2d.cpp chooses the algorithm
// per layer and pass (winograd_chosen).
#pragma once

#include <cstdint>

#include "kernels/cpu/im2col.h"

namespace bareyolo::cpu {

// Whether Winograd can compute this convolution: a 3x3 kernel, stride 1, padding at most 2.
bool winograd_applies(const ConvGeometry& g);

// When conv2d uses it. kMeasuredRule (the default; `--winograd off` gives kNever): where
// build/bench_conv3x3 measured it faster than im2col + GEMM on this project's CPU (winograd.cpp
// gives the figures); kAlways: wherever it applies (the tests of the Winograd path, the bench).
enum class WinogradUse { kNever, kMeasuredRule, kAlways };
void set_winograd_use(WinogradUse use);  // process-wide
WinogradUse winograd_use();

// The three passes of a convolution, which the rule judges separately.
enum class ConvPass { kForward, kDataGradient, kWeightGradient };

// Whether conv2d runs this pass of the convolution g (c_out filters) by Winograd.
bool winograd_chosen(const ConvGeometry& g, int64_t c_out, ConvPass pass);

// Values in the transformed filters: 16 * c_out * c_in.
inline int64_t winograd_filter_size(int64_t c_out, int64_t c_in) { return 16 * c_out * c_in; }

// u = the 16 (rows x cols) matrices U_ξ of weight (c_out, c_in, 3, 3): for the forward rows =
// c_out and cols = c_in; for_data_gradient, the flipped and transposed filters, rows = c_in.
template <class T>
void winograd_transform_filters(const T* weight, int64_t c_out, int64_t c_in,
                                bool for_data_gradient, T* u);

// For each of the batch's images i: out_i (c_out x out_h x out_w) = the correlation of input_i
// (g.channels x height x width, at input + i * input_stride) with the filters u (rows c_out),
// plus bias[o] when bias is given; `accumulate` adds onto out_i (at output + i *
// output_stride) instead. Runs on the thread pool.
template <class T>
void winograd_correlate(const T* input, int64_t input_stride, int64_t batch, const ConvGeometry& g,
                        int64_t c_out, const T* u, const T* bias, bool accumulate, T* output,
                        int64_t output_stride);

// The geometry of the data gradient's forward pass: dY (c_out x out_h x out_w) correlated with
// padding 2 - p gives the input's shape back.
ConvGeometry winograd_data_gradient_geometry(const ConvGeometry& g, int64_t c_out);

// du (16 x c_out x c_in) += the batch's dU: the sum over its images' tiles of
// (A dY A^T)_ξ * (B^T x B)_ξ^T, image i's x at input + i * input_stride and its dY at dy + i *
// dy_stride. Runs on the thread pool.
template <class T>
void winograd_add_filter_gradient(const T* input, int64_t input_stride, const T* dy,
                                  int64_t dy_stride, int64_t batch, const ConvGeometry& g,
                                  int64_t c_out, T* du);

// dweight (c_out, c_in, 3, 3) += G^T dU G for each (c_out, c_in).
template <class T>
void winograd_add_weight_gradient(const T* du, int64_t c_out, int64_t c_in, T* dweight);

}  // namespace bareyolo::cpu
