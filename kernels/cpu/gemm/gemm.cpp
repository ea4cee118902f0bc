// kernels/cpu/gemm/gemm.cpp — the blocked GEMM behind kernels/cpu/gemm/gemm.h (GotoBLAS/BLIS
// scheme).
//
//   C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C
//
// Loops, outermost first, with what each keeps in which cache (one core of Zen 4: 32 KB L1d,
// 1 MB L2):
//   task (m-block x n-block, <= 256 x 512)  independent pieces of C, shared over the pool;
//   p0   (depth block, <= kGemmMaxDepth = 128 steps of k)  pack the task's rows of op(A) into
//        MR-row panels (<= 256 x 128 floats, 128 KB) and its columns of op(B) into NR-column
//        panels (<= 128 x 512 floats, 256 KB); both stay in L2 for the two loops below;
//   j    (one B panel, 128 x 32 floats = 16 KB)  stays in L1 while
//   i    (the A panels, 8 x 128 floats = 4 KB each)  stream past it through the micro-kernel,
//        which keeps an MR x NR tile of C in registers over the depth block and adds it into C
//        once (times beta for the first depth block, plain after).
// Packing turns any lda/ldb and any transposition into contiguous, aligned, zero-padded
// panels, so the micro-kernel has one code path; edge tiles go through a scratch tile.
// A summed product (gemm_sum) runs the depth blocks of its terms one after another inside the
// same task, so a term is just more depth blocks.
//
// Products with op(A)'s rows and op(B)'s columns both contiguous over k (only B transposed:
// backward weight, dW += dY col^T) and few rows go through the dot-product path further down
// instead, which reads both operands in place.
//
// Reproducibility: the depth blocks are cut from k alone and each element of C is computed by
// exactly one task, so the bits never depend on the thread count or on the m/n partition.
// Which path runs depends on the shape (and on the float kernels in use: gemm_float_kernels)
// alone.
#include "kernels/cpu/gemm/gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include "kernels/cpu/gemm/gemm_kernels.h"
#include "kernels/cpu/host_memory.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/round_up.h"

namespace bareyolo::cpu {
namespace gemm_detail {
namespace {

// kGemmMaxDepth (gemm.h), the depth of a packed panel: at 128 steps the 8 x 32 kernel's B
// panel is 16 KB, half of L1, next to the A panels streaming past (256 would fill L1); the C
// tile is then loaded and stored once per 128 x 16 FMAs, which is noise.
// Rows of op(A) packed at once: a yolov5n Cout (<= 256) is one block; taller products
// (backward data, M = Cin*k*k) are cut into blocks that also become parallel tasks.
constexpr int64_t kMaxBlockRows = 256;
// Columns per task: wide enough that re-packing A once per task is noise, narrow enough
// that the 80x80 and 40x40 products give both cores several tasks each.
constexpr int64_t kMaxBlockCols = 512;
// A product smaller than this runs on the calling thread: waking the pool costs more.
constexpr double kMinParallelFlops = 2e6;
// Products with fewer tasks than this that run on the pool are cut into narrower n-blocks
// (never under kMinBlockCols columns), so the 20 x 20 layers split too; a constant, not the
// pool size.
constexpr int64_t kMinTasks = 4;
constexpr int64_t kMinBlockCols = 96;

// Element (r, p) of op(A) (r = row) or of op(B) transposed (r = column): either r or p is the
// contiguous index of the stored matrix. A summed product (gemm_sum) has one such matrix per
// term, `step` elements apart.
template <class T>
struct Operand {
  const T* data;
  int64_t ld;
  bool p_contiguous;  // element (r, p) at data[r * ld + p], else at data[p * ld + r]
  int64_t step = 0;
  const T* at(int64_t r, int64_t p) const {
    return p_contiguous ? data + r * ld + p : data + p * ld + r;
  }
  Operand term(int64_t t) const { return {data + t * step, ld, p_contiguous, step}; }
};

// Grow-only scratch, 64-byte aligned so panels can be loaded with aligned vector loads.
class PackBuffer {
 public:
  template <class T>
  T* get(int64_t count) {
    size_t bytes = static_cast<size_t>(round_up(count * static_cast<int64_t>(sizeof(T)), 64));
    if (bytes > capacity_) {
      storage_.reset(static_cast<std::byte*>(aligned_host_alloc(64, bytes, "GEMM packing")));
      capacity_ = bytes;
    }
    return reinterpret_cast<T*>(storage_.get());
  }

 private:
  struct FreeDeleter {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, FreeDeleter> storage_;
  size_t capacity_ = 0;
};
thread_local PackBuffer tls_a_block, tls_b_block;

// Transposes the 8 x 8 block of floats held in rows[0..7] in place: rows[j][i] = old rows[i][j].
__attribute__((always_inline)) inline void transpose_8x8(__m256 (&rows)[8]) {
  __m256 t0 = _mm256_unpacklo_ps(rows[0], rows[1]), t1 = _mm256_unpackhi_ps(rows[0], rows[1]);
  __m256 t2 = _mm256_unpacklo_ps(rows[2], rows[3]), t3 = _mm256_unpackhi_ps(rows[2], rows[3]);
  __m256 t4 = _mm256_unpacklo_ps(rows[4], rows[5]), t5 = _mm256_unpackhi_ps(rows[4], rows[5]);
  __m256 t6 = _mm256_unpacklo_ps(rows[6], rows[7]), t7 = _mm256_unpackhi_ps(rows[6], rows[7]);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  rows[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  rows[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  rows[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  rows[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  rows[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  rows[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  rows[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  rows[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// out[0, kWidth) = the first kWidth floats of v (kWidth: 8, or 6 for AVX2's 6-row A panels).
template <int kWidth>
void store_first(float* out, __m256 v) {
  static_assert(kWidth == 8 || kWidth == 6);
  if constexpr (kWidth == 8) {
    _mm256_storeu_ps(out, v);
  } else {
    _mm_storeu_ps(out, _mm256_castps256_ps128(v));
    _mm_storel_pi(reinterpret_cast<__m64*>(out + 4), _mm256_extractf128_ps(v, 1));
  }
}

// Packing writes panels of W rows r (rows of op(A), or columns of op(B)): panel q holds
// out[q * W * depth + p * W + r - q * W], zero for rows past `count`.

// dst[0, W) = src[0, W), as a fixed-size memcpy, which the compiler turns into a few vector
// moves (as a loop, the 8-value copy of A's panels compiled to 8 scalar moves).
template <class T, int W>
void copy_step(const T* src, T* dst) {
  std::memcpy(dst, src, W * sizeof(T));
}

// The operand's step p is a contiguous run over r: copy step by step across all panels, so
// the source is read in long row-order streams the hardware prefetcher follows.
template <class T, int W>
void pack_by_steps(const Operand<T>& operand, int64_t r0, int64_t count, int64_t p0, int64_t depth,
                   T* out) {
  for (int64_t p = 0; p < depth; ++p) {
    const T* src = operand.at(r0, p0 + p);
    for (int64_t r = 0; r < count; r += W) {
      T* dst = out + r * depth + p * W;
      if (count - r >= W) {
        copy_step<T, W>(src + r, dst);
        continue;
      }
      for (int64_t q = 0; q < W; ++q) dst[q] = r + q < count ? src[r + q] : T(0);
    }
  }
}

// Each row r of the operand is contiguous over p: transpose panel by panel, 8 rows by 8 steps
// at a time for float (rows past `count` enter the transpose as zeros; a 6-row panel, AVX2's
// A, stores 6 of the 8 transposed lanes), element by element for the steps left over and for
// double. The rows lie far apart (backward weight: one row per column of op(B), HW floats
// long), too many streams for the hardware prefetcher, so each block prefetches the same rows
// one depth block ahead, which is what the next call packs.
template <class T, int W>
void pack_by_rows(const Operand<T>& operand, int64_t r0, int64_t count, int64_t p0, int64_t depth,
                  T* out) {
  for (int64_t panel_r = 0; panel_r < count; panel_r += W, out += W * depth) {
    const T* first = operand.at(r0 + panel_r, p0);
    const int64_t ld = operand.ld, valid = std::min<int64_t>(W, count - panel_r);
    int64_t p_done = 0;
    if constexpr (std::is_same_v<T, float> && (W % 8 == 0 || W == 6)) {
      constexpr int kGroupWidth = W % 8 == 0 ? 8 : W;
      p_done = depth / 8 * 8;
      for (int64_t p = 0; p < p_done; p += 8)
        for (int64_t r = 0; r < W; r += kGroupWidth) {
          __m256 rows[8];
          for (int64_t q = 0; q < 8; ++q) {
            const bool real = q < kGroupWidth && r + q < valid;
            if (real && p % 16 == 0)
              _mm_prefetch(reinterpret_cast<const char*>(first + (r + q) * ld + p + depth),
                           _MM_HINT_T0);
            rows[q] = real ? _mm256_loadu_ps(first + (r + q) * ld + p) : _mm256_setzero_ps();
          }
          transpose_8x8(rows);
          for (int64_t s = 0; s < 8; ++s) store_first<kGroupWidth>(out + (p + s) * W + r, rows[s]);
        }
    }
    for (int64_t p = p_done; p < depth; ++p) {
      T* dst = out + p * W;
      for (int64_t r = 0; r < valid; ++r) dst[r] = first[r * ld + p];
      for (int64_t r = valid; r < W; ++r) dst[r] = T(0);
    }
  }
}

// The block [r0, r0 + count) x [p0, p0 + depth) of an operand as consecutive W-row panels.
template <class T, int W>
void pack_block(const Operand<T>& operand, int64_t r0, int64_t count, int64_t p0, int64_t depth,
                T* out) {
  if (operand.p_contiguous)
    pack_by_rows<T, W>(operand, r0, count, p0, depth, out);
  else
    pack_by_steps<T, W>(operand, r0, count, p0, depth, out);
}

// A full-width micro-kernel and its narrow twin (gemm_kernels.h).
template <class T>
struct MicroKernels {
  MicroKernel<T> full, narrow;
};

// The portable micro-kernel (double, and any type without a SIMD kernel): an MR x kCols tile
// from B panels NR wide.
template <class T, int MR, int NR, int kCols>
void portable_micro_kernel(int64_t kc, const T* a_panel, const T* b_panel, T alpha, T beta, T* c,
                           int64_t ldc) {
  T acc[MR][kCols] = {};
  for (int64_t p = 0; p < kc; ++p, a_panel += MR, b_panel += NR)
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < kCols; ++j) acc[i][j] = std::fma(a_panel[i], b_panel[j], acc[i][j]);
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < kCols; ++j)
      c[i * ldc + j] =
          beta == T(0) ? alpha * acc[i][j] : std::fma(beta, c[i * ldc + j], alpha * acc[i][j]);
}

// Calls per_block(term, p0, depth, beta_now) for the depth blocks of every term in order:
// beta applies to the first block, later ones add onto C. That order alone fixes the bits.
template <class T, class PerBlock>
void for_each_depth_block(int64_t terms, int64_t k, int64_t depth_step, T beta,
                          PerBlock per_block) {
  for (int64_t t = 0; t < terms; ++t)
    for (int64_t p0 = 0; p0 < k; p0 += depth_step)
      per_block(t, p0, std::min(depth_step, k - p0), t == 0 && p0 == 0 ? beta : T(1));
}

// One task: C[row0.., col0..] (rows x cols) over all of k and every term.
template <class T, int MR, int NR>
void multiply_block(const MicroKernels<T>& kernels, const Operand<T>& a, const Operand<T>& b,
                    int64_t terms, int64_t k, int64_t depth_step, int64_t row0, int64_t rows,
                    int64_t col0, int64_t cols, T alpha, T beta, T* c, int64_t ldc) {
  T* a_block = tls_a_block.get<T>(round_up(rows, MR) * depth_step);
  T* b_block = tls_b_block.get<T>(round_up(cols, NR) * depth_step);
  alignas(64) T edge_tile[MR * NR];
  for_each_depth_block(
      terms, k, depth_step, beta, [&](int64_t t, int64_t p0, int64_t depth, T beta_now) {
        pack_block<T, MR>(a.term(t), row0, rows, p0, depth, a_block);
        pack_block<T, NR>(b.term(t), col0, cols, p0, depth, b_block);
        for (int64_t j = 0; j < cols; j += NR) {
          int64_t tile_cols = std::min<int64_t>(NR, cols - j);
          const int64_t kernel_cols = tile_cols <= NR / 2 ? NR / 2 : NR;
          MicroKernel<T> kernel = tile_cols <= NR / 2 ? kernels.narrow : kernels.full;
          const T* b_panel = b_block + j * depth;
          for (int64_t i = 0; i < rows; i += MR) {
            int64_t tile_rows = std::min<int64_t>(MR, rows - i);
            const T* a_panel = a_block + i * depth;
            T* c_tile = c + (row0 + i) * ldc + col0 + j;
            if (tile_rows == MR && tile_cols == kernel_cols) {
              kernel(depth, a_panel, b_panel, alpha, beta_now, c_tile, ldc);
              continue;
            }
            // Same arithmetic as the kernel's own store, so edge tiles round like full ones.
            kernel(depth, a_panel, b_panel, T(1), T(0), edge_tile, NR);
            for (int64_t r = 0; r < tile_rows; ++r)
              for (int64_t col = 0; col < tile_cols; ++col) {
                T product = alpha * edge_tile[r * NR + col];
                T& out = c_tile[r * ldc + col];
                out = beta_now == T(0) ? product : std::fma(beta_now, out, product);
              }
          }
        }
      });
}

// Whether a product's tasks go to the pool: not when it is too small to pay for waking it,
// nor when the pool would run them inline anyway (from inside another parallel loop, as a
// convolution's per-image GEMMs, or with one thread).
bool runs_on_pool(int64_t m, int64_t n, int64_t k, int64_t terms) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
                 static_cast<double>(terms) >=
             kMinParallelFlops &&
         !ThreadPool::global().runs_inline();
}

// Runs run_tasks(begin, end) over [0, tasks), on the pool or on this thread.
template <class RunTasks>
void run_product(bool on_pool, int64_t tasks, const RunTasks& run_tasks) {
  if (on_pool)
    parallel_for(tasks, 1, run_tasks);
  else
    run_tasks(0, tasks);
}

// Cuts C into tasks from the shape alone and runs them, on the pool when worth it.
template <class T, int MR, int NR>
void multiply(const MicroKernels<T>& kernels, const Operand<T>& a, const Operand<T>& b,
              int64_t terms, int64_t m, int64_t n, int64_t k, T alpha, T beta, T* c, int64_t ldc) {
  // Depth blocks of equal length (300 -> 150 + 150, not 256 + 44).
  int64_t depth_step = ceil_div(k, ceil_div(k, kGemmMaxDepth));
  int64_t row_blocks = ceil_div(m, kMaxBlockRows);
  int64_t block_rows = round_up(ceil_div(m, row_blocks), MR);
  row_blocks = ceil_div(m, block_rows);
  int64_t col_blocks = ceil_div(n, kMaxBlockCols);
  // Narrower blocks only for the pool's sake: run on this thread, each would pack A again.
  const bool on_pool = runs_on_pool(m, n, k, terms);
  if (on_pool && row_blocks * col_blocks < kMinTasks)
    col_blocks = std::max(col_blocks, std::min(ceil_div(kMinTasks, row_blocks), n / kMinBlockCols));
  int64_t block_cols = round_up(ceil_div(n, std::max<int64_t>(1, col_blocks)), NR);
  col_blocks = ceil_div(n, block_cols);

  auto run_tasks = [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      int64_t row0 = task % row_blocks * block_rows, col0 = task / row_blocks * block_cols;
      multiply_block<T, MR, NR>(kernels, a, b, terms, k, depth_step, row0,
                                std::min(block_rows, m - row0), col0,
                                std::min(block_cols, n - col0), alpha, beta, c, ldc);
    }
  };
  run_product(on_pool, row_blocks * col_blocks, run_tasks);
}

// The dot-product path (gemm_kernels.h): op(A)'s rows and op(B)'s columns both contiguous
// over p, read where they lie in R x Q tiles (4 x 6 on AVX-512, 4 x 3 on AVX2). Packing them
// would transpose both (each row of a packed panel holds one step p); for backward weight
// that was as much work as the FMAs. Loops per task: depth blocks of <= kDotDepth steps;
// R rows of op(A) (8 KB, in L1) against every Q columns of op(B) in the task (<= 126 x
// kDotDepth floats, 256 KB, in L2).
constexpr int64_t kDotDepth = 512;
constexpr int64_t kDotBlockRows = 32;
// Columns of op(B) per task: about 126, in whole tiles of q.
constexpr int64_t dot_block_cols(int q) { return 126 / q * q; }
// When the dot path runs: op(A) of at most kMaxDotRows rows, where a packed panel of op(B)
// would serve only a few micro-kernel calls (the early layers' c_out of 16 and 32; measured
// per layer of yolov5n at 320, batch 8, by build/bench_gemm's table against kMaxDotRows = 0:
// on AVX-512 6-59% faster there, and 0-11% slower at c_out >= 128, where packing is well
// amortised; the AVX2 tile, against the packed AVX2 kernel on the same table: 1.3-3x on the
// c_out 16 and 32 rows), and a depth of at least kMinDotDepth: a dot tile ends with a
// reduction of its accumulators (some 70 instructions for AVX-512's 24), which a short depth
// does not amortise.
constexpr int64_t kMaxDotRows = 32;
constexpr int64_t kMinDotDepth = 256;

// One task: C[row0.., col0..] (rows x cols) over all of k and every term, in R x Q tiles.
template <int R, int Q>
void multiply_dot_block(DotTile tile, const Operand<float>& all_a, const Operand<float>& all_b,
                        int64_t terms, int64_t k, int64_t depth_step, int64_t row0, int64_t rows,
                        int64_t col0, int64_t cols, float alpha, float beta, float* c,
                        int64_t ldc) {
  alignas(64) float sums[R * Q];
  for_each_depth_block(
      terms, k, depth_step, beta, [&](int64_t t, int64_t p0, int64_t depth, float beta_now) {
        const Operand<float> a = all_a.term(t), b = all_b.term(t);
        for (int64_t i = 0; i < rows; i += R) {
          const int64_t tile_rows = std::min<int64_t>(R, rows - i);
          // Past the edge a tile reads its first row again; those sums are never stored.
          const float* a_rows[R];
          for (int r = 0; r < R; ++r) a_rows[r] = a.at(row0 + i + (r < tile_rows ? r : 0), p0);
          for (int64_t j = 0; j < cols; j += Q) {
            const int64_t tile_cols = std::min<int64_t>(Q, cols - j);
            const float* b_rows[Q];
            for (int q = 0; q < Q; ++q) b_rows[q] = b.at(col0 + j + (q < tile_cols ? q : 0), p0);
            tile(depth, a_rows, b_rows, sums);
            // The SIMD kernels' store arithmetic: alpha * sum, plus beta * C unless beta is 0.
            for (int64_t r = 0; r < tile_rows; ++r)
              for (int64_t q = 0; q < tile_cols; ++q) {
                const float product = alpha * sums[r * Q + q];
                float& out = c[(row0 + i + r) * ldc + col0 + j + q];
                out = beta_now == 0.0f ? product : std::fma(beta_now, out, product);
              }
          }
        }
      });
}

template <int R, int Q>
void multiply_dot(DotTile tile, const Operand<float>& a, const Operand<float>& b, int64_t terms,
                  int64_t m, int64_t n, int64_t k, float alpha, float beta, float* c, int64_t ldc) {
  constexpr int64_t block_cols = dot_block_cols(Q);
  const int64_t depth_step = ceil_div(k, ceil_div(k, kDotDepth));
  const int64_t row_blocks = ceil_div(m, kDotBlockRows);
  const int64_t col_blocks = ceil_div(n, block_cols);
  run_product(runs_on_pool(m, n, k, terms), row_blocks * col_blocks,
              [&](int64_t begin, int64_t end) {
                for (int64_t task = begin; task < end; ++task) {
                  const int64_t row0 = task % row_blocks * kDotBlockRows;
                  const int64_t col0 = task / row_blocks * block_cols;
                  multiply_dot_block<R, Q>(tile, a, b, terms, k, depth_step, row0,
                                           std::min(kDotBlockRows, m - row0), col0,
                                           std::min(block_cols, n - col0), alpha, beta, c, ldc);
                }
              });
}

// C = beta * C, the whole product when k == 0 or alpha == 0 (A and B are then not read).
template <class T>
void scale(int64_t m, int64_t n, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
}

std::atomic<GemmFloatKernels> allowed_float_kernels{GemmFloatKernels::kBest};

// Whether float products run the AVX-512 kernels: where the CPU has them and they are allowed.
bool runs_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has && allowed_float_kernels.load(std::memory_order_relaxed) == GemmFloatKernels::kBest;
}

}  // namespace
}  // namespace gemm_detail

template <class T>
void gemm_sum(int64_t terms, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha,
              const T* a, int64_t lda, int64_t a_step, const T* b, int64_t ldb, int64_t b_step,
              T beta, T* c, int64_t ldc) {
  using namespace gemm_detail;
  if (m <= 0 || n <= 0) return;
  if (terms <= 0 || k <= 0 || alpha == T(0)) return scale(m, n, beta, c, ldc);
  // op(A) is read by rows r = i, op(B) by columns r = j.
  Operand<T> a_rows{a, lda, !trans_a, a_step}, b_cols{b, ldb, trans_b, b_step};
  if constexpr (std::is_same_v<T, float>) {
    const bool dot =
        a_rows.p_contiguous && b_cols.p_contiguous && m <= kMaxDotRows && k >= kMinDotDepth;
    if (runs_avx512() && dot)
      return multiply_dot<kAvx512DotRows, kAvx512DotCols>(dot_tile_avx512_4x6, a_rows, b_cols,
                                                          terms, m, n, k, alpha, beta, c, ldc);
    if (runs_avx512())
      return multiply<float, kAvx512Rows, kAvx512Cols>(
          {micro_kernel_avx512_8x32, micro_kernel_avx512_8x16}, a_rows, b_cols, terms, m, n, k,
          alpha, beta, c, ldc);
    if (dot)
      return multiply_dot<kAvx2DotRows, kAvx2DotCols>(dot_tile_avx2_4x3, a_rows, b_cols, terms, m,
                                                      n, k, alpha, beta, c, ldc);
    return multiply<float, kAvx2Rows, kAvx2Cols>({micro_kernel_avx2_6x16, micro_kernel_avx2_6x8},
                                                 a_rows, b_cols, terms, m, n, k, alpha, beta, c,
                                                 ldc);
  } else {
    return multiply<T, 4, 8>({portable_micro_kernel<T, 4, 8, 8>, portable_micro_kernel<T, 4, 8, 4>},
                             a_rows, b_cols, terms, m, n, k, alpha, beta, c, ldc);
  }
}

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  gemm_sum<T>(1, trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc);
}

const char* gemm_float_kernels() { return gemm_detail::runs_avx512() ? "avx512" : "avx2"; }

void set_gemm_float_kernels(GemmFloatKernels kernels) {
  gemm_detail::allowed_float_kernels.store(kernels);
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);
template void gemm_sum<float>(int64_t, bool, bool, int64_t, int64_t, int64_t, float, const float*,
                              int64_t, int64_t, const float*, int64_t, int64_t, float, float*,
                              int64_t);
template void gemm_sum<double>(int64_t, bool, bool, int64_t, int64_t, int64_t, double,
                               const double*, int64_t, int64_t, const double*, int64_t, int64_t,
                               double, double*, int64_t);

}  // namespace bareyolo::cpu
