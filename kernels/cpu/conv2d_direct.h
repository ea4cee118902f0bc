// kernels/cpu/conv2d_direct.h — the forward of a few-input-channel convolution (YOLOv5's
// stem: 3 channels, 6x6, stride 2) computed directly, without im2col or a GEMM.
//
// Through the GEMM such a layer is a product of few rows (c_out = 16 for yolov5n) over a very
// wide map: im2col writes a 108-row column matrix, the GEMM copies it again into packed
// panels, and each copied value then serves only 2 * c_out FLOPs, so the copies cost more
// than the FMAs (build/bench_gemm: the stem's forward runs at about a third of the core's
// peak). Here each output row reads its input rows once, split by column phase so that a
// stride of 2 becomes contiguous loads, and 4 output channels x 24 output columns stay in
// registers over all the taps.
//
// Same bits as the GEMM path: every output is one chain of fused multiply-adds over the taps
// in the column matrix's order (c, i, j) starting from zero, padding taps included (times a
// zero), as the GEMM's micro-kernels sum one depth block; direct_conv_applies asks for at most
// one depth block of taps (kGemmMaxDepth, kernels/cpu/gemm/gemm.h).
#pragma once

#include <cstdint>

#include "kernels/cpu/im2col.h"

namespace bareyolo::cpu {

// Whether direct_conv_forward computes this convolution: at most 4 input channels and
// kGemmMaxDepth taps in all (c_in * kh * kw), a stride of 1 or 2 across, and c_out a multiple
// of 4.
bool direct_conv_applies(const ConvGeometry& g, int64_t c_out);

// out (c_out x out_h x out_w, dense) = the convolution of one image (channels x height x
// width, dense) with weight (c_out x channels x kh x kw, dense), plus bias per output channel
// when bias is not null.
void direct_conv_forward(const float* image, const ConvGeometry& g, const float* weight,
                         const float* bias, int64_t c_out, float* out);

}  // namespace bareyolo::cpu
