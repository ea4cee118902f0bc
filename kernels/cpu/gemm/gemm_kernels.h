// kernels/cpu/gemm/gemm_kernels.h — the register-blocked micro-kernels under
// kernels/cpu/gemm/gemm.cpp.
//
// A micro-kernel computes one MR x NR tile of C from two packed panels:
//   a_panel: kc steps of MR values of op(A)  (a_panel[p * MR + i] = op(A)[i][p])
//   b_panel: kc steps of NR values of op(B)  (b_panel[p * NR + j] = op(B)[p][j])
//   C tile = alpha * sum_p a_panel[p][:] (outer) b_panel[p][:] + beta * C tile
// with the tile's rows ldc elements apart. beta == 0 means the tile is only written, never
// read. The panels are 64-byte aligned and padded with zeros to the full MR / NR, so a
// kernel never branches on edges; gemm.cpp runs edge tiles into a scratch tile instead.
// Each kernel has a narrow twin computing only the first NR / 2 columns of the tile (the
// B panel keeps its NR-wide steps): a last strip of at most NR / 2 columns, as N = 100 or
// 108 leave, then costs half a full tile instead of a full one.
//
// Each SIMD kernel lives in its own file so that the instruction set it needs is confined
// to it: the AVX-512 one is compiled for avx512f and only called after a run-time check.
#pragma once

#include <cstdint>

namespace bareyolo::cpu::gemm_detail {

template <class T>
using MicroKernel = void (*)(int64_t kc, const T* a_panel, const T* b_panel, T alpha, T beta, T* c,
                             int64_t ldc);

// AVX2 + FMA, 6 x 16: 12 ymm accumulators, 2 loads of B and 6 broadcasts of A per step.
inline constexpr int kAvx2Rows = 6, kAvx2Cols = 16;
void micro_kernel_avx2_6x16(int64_t kc, const float* a_panel, const float* b_panel, float alpha,
                            float beta, float* c, int64_t ldc);
void micro_kernel_avx2_6x8(int64_t kc, const float* a_panel, const float* b_panel, float alpha,
                           float beta, float* c, int64_t ldc);

// AVX-512F, 8 x 32: 16 zmm accumulators, 2 loads of B and 8 broadcasts of A per step.
inline constexpr int kAvx512Rows = 8, kAvx512Cols = 32;
void micro_kernel_avx512_8x32(int64_t kc, const float* a_panel, const float* b_panel, float alpha,
                              float beta, float* c, int64_t ldc);
void micro_kernel_avx512_8x16(int64_t kc, const float* a_panel, const float* b_panel, float alpha,
                              float beta, float* c, int64_t ldc);

// A dot-product tile, for C = op(A) * op(B) where the rows of op(A) and the columns of op(B)
// are both contiguous over p (gemm(false, true, ...): backward weight, dW += dY col^T), so
// that neither needs packing: for a tile of R x Q, sums[i * Q + j] = sum over p < kc of
// a_rows[i][p] * b_rows[j][p], each sum reduced in a fixed order that depends on kc alone.
using DotTile = void (*)(int64_t kc, const float* const* a_rows, const float* const* b_rows,
                         float* sums);

// AVX-512F, 4 x 6: 24 zmm accumulators, 10 vector loads per 24 FMAs.
inline constexpr int kAvx512DotRows = 4, kAvx512DotCols = 6;
void dot_tile_avx512_4x6(int64_t kc, const float* const* a_rows, const float* const* b_rows,
                         float* sums);

// AVX2 + FMA, 4 x 3: 12 ymm accumulators, 7 vector loads per 12 FMAs.
inline constexpr int kAvx2DotRows = 4, kAvx2DotCols = 3;
void dot_tile_avx2_4x3(int64_t kc, const float* const* a_rows, const float* const* b_rows,
                       float* sums);

}  // namespace bareyolo::cpu::gemm_detail
