// tests/unit/gemm.cpp — cpu::gemm against a naive triple loop in double.
//
// Every matrix is stored with a row stride larger than its width and the gap filled with NaN
// (A, B: a kernel reading past a row poisons C) or a sentinel (C: a kernel writing past a row
// is caught). beta == 0 cases start C as NaN, which must never show through.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/gemm/gemm.h"
#include "kernels/cpu/gemm/gemm_kernels.h"
#include "tests/support/testing.h"

namespace bareyolo {
namespace {

using testing::Rng;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kCSentinel = 12345.0;

struct GemmCase {
  bool trans_a = false, trans_b = false;
  int64_t m = 1, n = 1, k = 1;
  double alpha = 1.0, beta = 0.0;
  int64_t row_gap = 0;  // extra elements at the end of every stored row

  std::string str() const {
    std::ostringstream text;
    text << "gemm(trans_a=" << trans_a << " trans_b=" << trans_b << " m=" << m << " n=" << n
         << " k=" << k << " alpha=" << alpha << " beta=" << beta << " row_gap=" << row_gap << ")";
    return text.str();
  }
};

// rows x cols values with row stride cols + gap; the gap holds `gap_value`.
template <class T>
struct StoredMatrix {
  int64_t rows, cols, ld;
  std::vector<T> values;

  StoredMatrix(Rng& rng, int64_t rows_, int64_t cols_, int64_t gap, double gap_value)
      : rows(rows_),
        cols(cols_),
        ld(cols_ + gap),
        values(static_cast<size_t>(std::max<int64_t>(1, rows_ * ld)), static_cast<T>(gap_value)) {
    std::vector<T> random = testing::random_vector<T>(rng, rows * cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t col = 0; col < cols; ++col) at(r, col) = random[r * cols + col];
  }
  T& at(int64_t r, int64_t col) { return values[r * ld + col]; }
  T at(int64_t r, int64_t col) const { return values[r * ld + col]; }
};

// Runs one case through cpu::gemm<T> and checks it against the double reference.
template <class T>
void check_gemm(Rng& rng, const GemmCase& gc, double rtol, double atol_per_sqrt_k) {
  StoredMatrix<T> a(rng, gc.trans_a ? gc.k : gc.m, gc.trans_a ? gc.m : gc.k, gc.row_gap, kNaN);
  StoredMatrix<T> b(rng, gc.trans_b ? gc.n : gc.k, gc.trans_b ? gc.k : gc.n, gc.row_gap, kNaN);
  StoredMatrix<T> c(rng, gc.m, gc.n, gc.row_gap, kCSentinel);
  if (gc.beta == 0.0)
    for (int64_t i = 0; i < gc.m; ++i)
      for (int64_t j = 0; j < gc.n; ++j) c.at(i, j) = static_cast<T>(kNaN);

  std::vector<double> expected;
  for (int64_t i = 0; i < gc.m; ++i)
    for (int64_t j = 0; j < gc.n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < gc.k; ++p)
        sum += static_cast<double>(gc.trans_a ? a.at(p, i) : a.at(i, p)) *
               static_cast<double>(gc.trans_b ? b.at(j, p) : b.at(p, j));
      double old = gc.beta == 0.0 ? 0.0 : gc.beta * static_cast<double>(c.at(i, j));
      expected.push_back(gc.alpha * sum + old);
    }

  cpu::gemm<T>(gc.trans_a, gc.trans_b, gc.m, gc.n, gc.k, static_cast<T>(gc.alpha), a.values.data(),
               a.ld, b.values.data(), b.ld, static_cast<T>(gc.beta), c.values.data(), c.ld);

  std::vector<double> actual, gap;
  for (int64_t i = 0; i < gc.m; ++i) {
    for (int64_t j = 0; j < gc.n; ++j) actual.push_back(static_cast<double>(c.at(i, j)));
    for (int64_t j = gc.n; j < c.ld; ++j) gap.push_back(static_cast<double>(c.at(i, j)));
  }
  double atol = atol_per_sqrt_k * std::sqrt(static_cast<double>(std::max<int64_t>(1, gc.k)));
  testing::check_close(actual, expected, rtol, atol, gc.str());
  testing::check_close(gap, std::vector<double>(gap.size(), kCSentinel), 0.0, 0.0,
                       gc.str() + " wrote into the row gap of C");
}

// All four transpositions over shapes that hit full and partial tiles of every kernel
// (6x16, 8x32, 4x8), several depth blocks, and the beta == 0 / beta != 0 paths.
template <class T>
void check_many_shapes(double rtol, double atol_per_sqrt_k) {
  Rng rng(20240611);
  const int64_t shapes[][3] = {{1, 1, 1},      {7, 13, 17},  {13, 7, 33},   {17, 33, 7},
                               {6, 16, 256},   {8, 32, 257}, {33, 100, 13}, {100, 17, 129},
                               {65, 129, 300}, {3, 1, 600},  {1, 200, 40},  {257, 5, 9},
                               {16, 100, 108}, {48, 70, 520}};
  const double scalars[][2] = {{1.0, 0.0}, {-0.75, 0.5}, {2.0, 1.0}};
  int case_index = 0;
  for (int trans = 0; trans < 4; ++trans)
    for (const auto& shape : shapes)
      for (const auto& scalar : scalars) {
        GemmCase gc{(trans & 1) != 0, (trans & 2) != 0, shape[0],  shape[1],
                    shape[2],         scalar[0],        scalar[1], case_index++ % 3 * 3};
        check_gemm<T>(rng, gc, rtol, atol_per_sqrt_k);
      }
  for (int i = 0; i < 24; ++i) {
    GemmCase gc{testing::random_int(rng, 0, 1) == 1,
                testing::random_int(rng, 0, 1) == 1,
                testing::random_int(rng, 1, 150),
                testing::random_int(rng, 1, 150),
                testing::random_int(rng, 1, 700),
                1.25,
                i % 2 == 0 ? 0.0 : -1.5,
                testing::random_int(rng, 0, 5)};
    check_gemm<T>(rng, gc, rtol, atol_per_sqrt_k);
  }
}

TEST_CASE("gemm float matches a double reference for every transposition and edge tile") {
  check_many_shapes<float>(1e-5, 1e-5);
}

// The AVX2 kernels and their packing, on any CPU (the test above runs AVX-512's where the CPU
// has it).
TEST_CASE("gemm float on the AVX2 kernels matches a double reference on every path") {
  struct AllowOnlyAvx2 {
    AllowOnlyAvx2() { cpu::set_gemm_float_kernels(cpu::GemmFloatKernels::kAvx2); }
    ~AllowOnlyAvx2() { cpu::set_gemm_float_kernels(cpu::GemmFloatKernels::kBest); }
  } only_avx2;
  REQUIRE(std::string(cpu::gemm_float_kernels()) == "avx2");
  check_many_shapes<float>(1e-5, 1e-5);
  Rng rng(32);  // the dot-product path: only B transposed, few rows, a deep sum
  for (int64_t m : {5, 32}) check_gemm<float>(rng, GemmCase{false, true, m, 130, 1100}, 1e-5, 1e-5);
}

TEST_CASE("gemm double matches a double reference for every transposition and edge tile") {
  check_many_shapes<double>(1e-12, 1e-12);
}

TEST_CASE("gemm with k equal to zero or alpha equal to zero only scales C by beta") {
  Rng rng(7);
  for (double beta : {0.0, 0.5}) {
    for (int64_t k : {0, 5}) {
      GemmCase gc{false, true, 9, 37, k, k == 0 ? 1.0 : 0.0, beta, 2};
      check_gemm<float>(rng, gc, 0.0, 0.0);
      check_gemm<double>(rng, gc, 0.0, 0.0);
    }
  }
  // A and B are not read at all: NaN there must not reach C.
  std::vector<float> nan_operand(64, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> c(4 * 8, 2.0f);
  cpu::gemm<float>(false, false, 4, 8, 8, 0.0f, nan_operand.data(), 8, nan_operand.data(), 8, 3.0f,
                   c.data(), 8);
  testing::check_close(c, std::vector<double>(c.size(), 6.0), 0.0, 0.0, "alpha = 0");
}

TEST_CASE("gemm with m or n equal to zero touches nothing") {
  std::vector<float> c(4, 1.0f), operand(4, 1.0f);
  cpu::gemm<float>(false, false, 0, 2, 2, 1.0f, operand.data(), 2, operand.data(), 2, 0.0f,
                   c.data(), 2);
  cpu::gemm<float>(false, false, 2, 0, 2, 1.0f, operand.data(), 2, operand.data(), 2, 0.0f,
                   c.data(), 2);
  testing::check_close(c, std::vector<double>(4, 1.0), 0.0, 0.0, "empty product");
}

// The dot-product path (backward weight's products: only B transposed, few rows of C, a deep
// sum): partial tiles at both edges (4 x 6 on AVX-512, 4 x 3 on AVX2), a depth that is not a
// multiple of 16, several depth blocks, and a task edge in the columns (130 > 126).
TEST_CASE("gemm's dot-product path matches a double reference on edge tiles and deep sums") {
  Rng rng(31);
  int case_index = 0;
  for (int64_t m : {1, 5, 32})
    for (int64_t n : {1, 7, 130})
      for (int64_t k : {256, 1100}) {
        const bool accumulate = case_index++ % 2 == 1;
        GemmCase gc{false, true, m, n, k, accumulate ? -0.5 : 1.0, accumulate ? 1.0 : 0.0, 3};
        check_gemm<float>(rng, gc, 1e-5, 1e-5);
      }
}

// The product is split into several tasks over the pool; the result must be correct and the
// same bits whatever the number of threads.
TEST_CASE("gemm gives identical bits on one and two threads for a product split into tasks") {
  // The second shape goes through the dot-product path when only B is transposed.
  const int64_t shapes[][3] = {{70, 3000, 300}, {32, 1000, 1100}};
  for (const auto& shape : shapes) {
    for (int trans = 0; trans < 4; ++trans) {
      GemmCase gc{(trans & 1) != 0, (trans & 2) != 0, shape[0], shape[1], shape[2], 0.5, 0.25, 1};
      std::vector<std::vector<float>> results;
      for (int threads : {1, 2}) {
        const testing::PoolThreads pool(threads);
        Rng rng(99);  // same inputs for both runs
        StoredMatrix<float> a(rng, gc.trans_a ? gc.k : gc.m, gc.trans_a ? gc.m : gc.k, 1, kNaN);
        StoredMatrix<float> b(rng, gc.trans_b ? gc.n : gc.k, gc.trans_b ? gc.k : gc.n, 1, kNaN);
        StoredMatrix<float> c(rng, gc.m, gc.n, 1, kCSentinel);
        cpu::gemm<float>(gc.trans_a, gc.trans_b, gc.m, gc.n, gc.k, 0.5f, a.values.data(), a.ld,
                         b.values.data(), b.ld, 0.25f, c.values.data(), c.ld);
        results.push_back(c.values);
      }
      REQUIRE(results[0].size() == results[1].size());
      CHECK_MESSAGE(
          std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)) == 0,
          gc.str() << " differs between 1 and 2 threads");
      Rng rng(5);
      check_gemm<float>(rng, gc, 1e-5, 1e-5);
    }
  }
}

// gemm_sum is defined as gemm called term by term (beta on the first, 1 after): the same bits,
// on one thread and on two, for the packed kernels (every transposition) and the dot-product
// path (the last shape, only B transposed), terms that lie apart in memory with NaN between
// them, and a C that starts as NaN (beta = 0, never read).
TEST_CASE("gemm_sum gives the bits of gemm called term by term") {
  const int64_t shapes[][3] = {{70, 300, 100}, {9, 33, 17}, {32, 130, 300}};
  constexpr int64_t kTerms = 5, kTermGap = 3;
  for (const auto& shape : shapes)
    for (int trans = 0; trans < 4; ++trans) {
      const bool trans_a = (trans & 1) != 0, trans_b = (trans & 2) != 0;
      const int64_t m = shape[0], n = shape[1], k = shape[2];
      const int64_t a_step = m * k + kTermGap, b_step = k * n + kTermGap;
      Rng rng(41);
      std::vector<float> a(static_cast<size_t>(kTerms * a_step), std::nanf(""));
      std::vector<float> b(static_cast<size_t>(kTerms * b_step), std::nanf(""));
      for (int64_t t = 0; t < kTerms; ++t) {
        const std::vector<float> a_t = testing::random_vector<float>(rng, m * k);
        const std::vector<float> b_t = testing::random_vector<float>(rng, k * n);
        std::copy(a_t.begin(), a_t.end(), a.begin() + t * a_step);
        std::copy(b_t.begin(), b_t.end(), b.begin() + t * b_step);
      }
      const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
      for (float beta : {0.0f, 0.5f}) {
        std::vector<float> start = testing::random_vector<float>(rng, m * n);
        if (beta == 0.0f) std::fill(start.begin(), start.end(), std::nanf(""));
        std::vector<float> expected = start;
        for (int64_t t = 0; t < kTerms; ++t)
          cpu::gemm<float>(trans_a, trans_b, m, n, k, 0.75f, a.data() + t * a_step, lda,
                           b.data() + t * b_step, ldb, t == 0 ? beta : 1.0f, expected.data(), n);
        for (int threads : {1, 2}) {
          const testing::PoolThreads pool(threads);
          std::vector<float> c = start;
          cpu::gemm_sum<float>(kTerms, trans_a, trans_b, m, n, k, 0.75f, a.data(), lda, a_step,
                               b.data(), ldb, b_step, beta, c.data(), n);
          CAPTURE(threads);
          CHECK_MESSAGE(std::memcmp(c.data(), expected.data(), c.size() * sizeof(float)) == 0,
                        "gemm_sum of m=" << m << " n=" << n << " k=" << k << " trans_a=" << trans_a
                                         << " trans_b=" << trans_b << " beta=" << beta
                                         << " differs from gemm term by term");
        }
      }
    }
}

// The SIMD micro-kernels one by one, so that the AVX2 ones are checked on a CPU where gemm
// itself runs the AVX-512 ones.
struct MicroKernelUnderTest {
  const char* name;
  cpu::gemm_detail::MicroKernel<float> kernel;
  int rows, cols, panel_cols;  // the tile it computes; the width of its B panel
  bool needs_avx512;
};

// A 64-byte-aligned view into a vector, as the packed panels are.
float* aligned_64(std::vector<float>& values) {
  auto address = reinterpret_cast<uintptr_t>(values.data());
  return reinterpret_cast<float*>((address + 63) / 64 * 64);
}

TEST_CASE("gemm micro-kernels compute their tile from packed panels") {
  using namespace cpu::gemm_detail;
  const MicroKernelUnderTest kernels[] = {
      {"avx2 6x16", micro_kernel_avx2_6x16, kAvx2Rows, kAvx2Cols, kAvx2Cols, false},
      {"avx2 6x8", micro_kernel_avx2_6x8, kAvx2Rows, kAvx2Cols / 2, kAvx2Cols, false},
      {"avx512 8x32", micro_kernel_avx512_8x32, kAvx512Rows, kAvx512Cols, kAvx512Cols, true},
      {"avx512 8x16", micro_kernel_avx512_8x16, kAvx512Rows, kAvx512Cols / 2, kAvx512Cols, true},
  };
  Rng rng(3);
  for (const auto& under_test : kernels) {
    if (under_test.needs_avx512 && !__builtin_cpu_supports("avx512f")) continue;
    for (int64_t kc : {1, 2, 37}) {
      for (double beta : {0.0, 0.5}) {
        std::vector<float> a_storage =
            testing::random_vector<float>(rng, kc * under_test.rows + 16);
        std::vector<float> b_storage =
            testing::random_vector<float>(rng, kc * under_test.panel_cols + 16);
        const float* a_panel = aligned_64(a_storage);
        const float* b_panel = aligned_64(b_storage);
        const int64_t ldc = under_test.cols + 3;
        std::vector<float> c(static_cast<size_t>(under_test.rows * ldc), float(kCSentinel));
        std::vector<double> expected;
        for (int i = 0; i < under_test.rows; ++i)
          for (int j = 0; j < under_test.cols; ++j) {
            float& out = c[i * ldc + j];
            out = beta == 0.0 ? float(kNaN) : float(testing::random_vector(rng, 1)[0]);
            double sum = 0;
            for (int64_t p = 0; p < kc; ++p)
              sum += double(a_panel[p * under_test.rows + i]) *
                     double(b_panel[p * under_test.panel_cols + j]);
            expected.push_back(-1.5 * sum + (beta == 0.0 ? 0.0 : beta * out));
          }
        under_test.kernel(kc, a_panel, b_panel, -1.5f, float(beta), c.data(), ldc);
        std::vector<double> actual, gap;
        for (int i = 0; i < under_test.rows; ++i) {
          for (int j = 0; j < under_test.cols; ++j) actual.push_back(c[i * ldc + j]);
          for (int64_t j = under_test.cols; j < ldc; ++j) gap.push_back(c[i * ldc + j]);
        }
        std::string what = std::string(under_test.name) + " kc=" + std::to_string(kc) +
                           " beta=" + std::to_string(beta);
        testing::check_close(actual, expected, 1e-5, 1e-5 * std::sqrt(double(kc)), what);
        testing::check_close(gap, std::vector<double>(gap.size(), kCSentinel), 0.0, 0.0,
                             what + " wrote past its tile");
      }
    }
  }
}

// The dot-product tiles on their own: rows at any alignment, depths below, at and past one
// vector (the masked tail), each sum against the double reference.
struct DotTileUnderTest {
  const char* name;
  cpu::gemm_detail::DotTile tile;
  int rows, cols;
  bool needs_avx512;
};

TEST_CASE("gemm dot-product tiles sum every pair of their rows") {
  using namespace cpu::gemm_detail;
  const DotTileUnderTest tiles[] = {
      {"avx2 4x3", dot_tile_avx2_4x3, kAvx2DotRows, kAvx2DotCols, false},
      {"avx512 4x6", dot_tile_avx512_4x6, kAvx512DotRows, kAvx512DotCols, true},
  };
  Rng rng(4);
  for (const auto& under_test : tiles) {
    if (under_test.needs_avx512 && !__builtin_cpu_supports("avx512f")) continue;
    const int rows = under_test.rows, cols = under_test.cols;
    for (int64_t kc : {1, 7, 8, 15, 16, 37, 300}) {
      // Rows one float apart from a multiple of 16, so no load is aligned; a NaN after each
      // row poisons any sum that reads past kc.
      const int64_t stride = kc + 17;
      std::vector<float> storage = testing::random_vector<float>(rng, (rows + cols) * stride);
      std::vector<const float*> a_rows, b_rows;
      for (int r = 0; r < rows + cols; ++r) {
        float* row = storage.data() + r * stride + 1;
        row[kc] = std::numeric_limits<float>::quiet_NaN();
        (r < rows ? a_rows : b_rows).push_back(row);
      }
      std::vector<float> sums(static_cast<size_t>(rows * cols), float(kNaN));
      under_test.tile(kc, a_rows.data(), b_rows.data(), sums.data());
      std::vector<double> actual(sums.begin(), sums.end()), expected;
      for (int i = 0; i < rows; ++i)
        for (int j = 0; j < cols; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < kc; ++p) sum += double(a_rows[i][p]) * double(b_rows[j][p]);
          expected.push_back(sum);
        }
      testing::check_close(actual, expected, 1e-5, 1e-5 * std::sqrt(double(kc)),
                           std::string(under_test.name) + " kc=" + std::to_string(kc));
    }
  }
}

}  // namespace
}  // namespace bareyolo
