// kernels/cpu/gemm/gemm.h — general matrix multiply on the CPU, the engine of every convolution.
//
//   C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C
//
// Row-major. op(A) = A, stored m x k with row stride lda >= k, or (trans_a) A^T with A
// stored k x m, lda >= m; likewise B. beta == 0 means C is only written, never read (it may
// hold NaN). float runs a packed, cache-blocked, register-blocked SIMD kernel (products with
// only B transposed, few rows and a deep sum, backward weight's shape, run dot-product tiles
// that read A and B in place instead); double runs the packed blocking with a portable
// micro-kernel (the precision the gradient checks use).
// Large products are split over the CPU thread pool.
#pragma once

#include <cstdint>

namespace bareyolo::cpu {

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// A sum of `terms` products of the same shape into one C:
//   C = alpha * sum over t < terms of op(A_t) * op(B_t) + beta * C,
//   A_t at a + t * a_step, B_t at b + t * b_step,
// the bits of gemm called for each term in order (beta for the first, 1 after), but one split
// of C over the pool for all of them: backward weight's sum over a batch's images, whose
// per-image products at low resolution are too short to split well one by one.
template <class T>
void gemm_sum(int64_t terms, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha,
              const T* a, int64_t lda, int64_t a_step, const T* b, int64_t ldb, int64_t b_step,
              T beta, T* c, int64_t ldc);

// The instruction set of the float kernels gemm runs on this CPU: "avx512" or "avx2". Their
// order of additions differs, so float results are bit for bit the same only between CPUs
// that give the same answer here (a test comparing with results written elsewhere asks).
const char* gemm_float_kernels();

// The packed kernels (every product but the dot-product path's: only B transposed, few rows,
// a deep sum) cut k into depth blocks of at most this many steps (why 128: gemm.cpp). A k of
// at most kGemmMaxDepth is one block: each element of C is then one chain of fused
// multiply-adds over p in order, from zero, stored as alpha * sum (+ beta * C), which is what
// another kernel must compute to give gemm's bits (kernels/cpu/conv2d_direct.h does).
inline constexpr int64_t kGemmMaxDepth = 128;

// Which float kernels gemm may choose, process-wide: the best this CPU has (the default), or
// AVX2's even where AVX-512 is there, so that a test on an AVX-512 CPU also runs the AVX2
// kernels and their packing (6-row panels of A, 16-column panels of B).
enum class GemmFloatKernels { kBest, kAvx2 };
void set_gemm_float_kernels(GemmFloatKernels kernels);

}  // namespace bareyolo::cpu
