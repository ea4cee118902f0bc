// tools/selftest/pool_checks.cpp — max pooling (SPPF's 5x5 and the others YOLOv5 may use, the
// shared-memory stride-1 path and the direct one) and nearest x2 upsampling, formerly
// tests/cuda/pool.cpp and upsample.cpp (see selftest.h; tolerances: the top of selftest.cpp).
// Random maps and maps full of ties (values from {0, 1, 2}: which element of a window is "the
// first maximum" then decides every gradient), dense and channel-slice views, sizes that do not
// divide a GPU's 32x32 tiles. The forwards only compare and copy, so they equal the double
// reference exactly. The backwards add gradients in the CPU's order, which a GPU keeps: exact
// against the CPU's float op (in double the sums round elsewhere).
#include <vector>

#include "kernels/ops.h"
#include "tools/selftest/checks.h"

namespace bareyolo::selftest {

namespace {

Shape4 pooled(Shape4 x, ops::Pool2dParams p) {
  return {x.n, x.c, ops::conv_out_size(x.h, p.kernel, p.stride, p.pad),
          ops::conv_out_size(x.w, p.kernel, p.stride, p.pad)};
}

// ---- max pooling -------------------------------------------------------------------------------

// One pooling case: the pool, x, the output's gradient, and the input gradient's initial value;
// the channels each reads and writes (all of them, or slices of the maps).
struct PoolCase {
  ops::Pool2dParams pool;
  Tensor x, dy, dx;
};

// Every window YOLOv5 pools with or may: SPPF's 5x5 and 13x13 (SPP), stride 1 and 2, with and
// without padding; on one element, a 20x20 map, a wide 45x70 one and odd sizes.
std::vector<PoolCase> dense_cases() {
  const ops::Pool2dParams pools[] = {{5, 1, 2}, {3, 1, 1}, {13, 1, 6},
                                     {3, 2, 1}, {2, 2, 0}, {5, 2, 2}};
  const Shape4 shapes[] = {{1, 1, 1, 1}, {2, 3, 20, 20}, {2, 2, 45, 70}, {1, 2, 33, 31}};
  Random random(51);
  std::vector<PoolCase> cases;
  for (const ops::Pool2dParams& p : pools)
    for (const Shape4& s : shapes) {
      if (s.h + 2 * p.pad < p.kernel || s.w + 2 * p.pad < p.kernel) continue;
      for (bool ties : {false, true}) {
        PoolCase c;
        c.pool = p;
        c.x = ties ? random.tied(s) : random.uniform(s, -3, 3);
        c.dx = random.uniform(s, -3, 3);
        c.dy = random.uniform(pooled(s, p), -3, 3);
        cases.push_back(c);
      }
    }
  return cases;
}

// Channel slices of a 3 x 8 x 37 x 29 map: the forward pools channels 2..4 of a random x into
// channels 4..6 of the output; the backward, of a tied x, adds dy's channels 5..7 into dx's 1..3.
struct SliceCase {
  ops::Pool2dParams pool;
  Tensor x, tied_x, dy, dx;
};
std::vector<SliceCase> slice_cases() {
  const Shape4 parent{3, 8, 37, 29};
  Random random(52);
  std::vector<SliceCase> cases;
  for (const ops::Pool2dParams p : {ops::Pool2dParams{5, 1, 2}, ops::Pool2dParams{3, 2, 1}}) {
    SliceCase c;
    c.pool = p;
    c.x = random.uniform(parent, -3, 3);
    c.dx = random.uniform(parent, -3, 3);
    c.tied_x = random.tied(parent);
    c.dy = random.uniform(pooled(parent, p), -3, 3);
    cases.push_back(c);
  }
  return cases;
}

double check_maxpool_forward(const Device& dut) {
  const double dense = worst_over(dense_cases(), [&](const PoolCase& c) {
    return compare_with_reference(dut, {c.x}, {poisoned(c.dy.shape())},
                                  [&]<class T>(Tensors& in, Tensors& out) {
                                    ops::maxpool2d_forward<T>(as<T>(in[0]), c.pool, as<T>(out[0]));
                                  });
  });
  const double slices = worst_over(slice_cases(), [&](const SliceCase& c) {
    return compare_with_reference(dut, {c.x}, {poisoned(c.dy.shape())},
                                  [&]<class T>(Tensors& in, Tensors& out) {
                                    ops::maxpool2d_forward<T>(as<T>(in[0].channels(2, 5)), c.pool,
                                                              as<T>(out[0].channels(4, 7)));
                                    out[0].channels(0, 4).zero();  // on both sides
                                    out[0].channels(7, 8).zero();
                                  });
  });
  return std::max(dense, slices);
}

double check_maxpool_backward(const Device& dut) {
  const double dense = worst_over(dense_cases(), [&](const PoolCase& c) {
    return compare_with_cpu(dut, {c.x, c.dy}, {c.dx}, [&](Tensors& in, Tensors& out) {
      ops::maxpool2d_backward<float>(as<float>(in[0]), as<float>(in[1]), c.pool, as<float>(out[0]));
    });
  });
  const double slices = worst_over(slice_cases(), [&](const SliceCase& c) {
    return compare_with_cpu(dut, {c.tied_x, c.dy}, {c.dx}, [&](Tensors& in, Tensors& out) {
      ops::maxpool2d_backward<float>(as<float>(in[0].channels(2, 5)),
                                     as<float>(in[1].channels(5, 8)), c.pool,
                                     as<float>(out[0].channels(1, 4)));
    });
  });
  return std::max(dense, slices);
}

// SPPF's three chained 5x5 pools (one kernel on a GPU, three pools on the CPU), in SPPF's
// layout: x is the first quarter of the concatenation, the pools the other three.
double check_sppf_chain(const Device& dut) {
  const ops::Pool2dParams pool{5, 1, 2};
  Random random(53);
  double worst = 0;
  for (Shape4 s : {Shape4{2, 4, 20, 20}, Shape4{1, 3, 40, 33}, Shape4{2, 2, 3, 5}})
    for (bool ties : {false, true}) {
      const Tensor x = ties ? random.tied(s) : random.uniform(s, -3, 3);
      const int64_t c = s.c;
      worst = std::max(worst, compare_with_reference(dut, {x}, {poisoned({s.n, 4 * c, s.h, s.w})},
                                                     [&]<class T>(Tensors& in, Tensors& out) {
                                                       Tensor first = out[0].channels(0, c);
                                                       first.copy_from(in[0]);
                                                       ops::maxpool2d_chain3_forward<T>(
                                                           as<T>(first), pool,
                                                           as<T>(out[0].channels(c, 2 * c)),
                                                           as<T>(out[0].channels(2 * c, 3 * c)),
                                                           as<T>(out[0].channels(3 * c, 4 * c)));
                                                     }));
    }
  return worst;
}

// ---- nearest x2 upsampling ---------------------------------------------------------------------

struct UpsampleCase {
  Tensor x, dy, dx;  // x: the small map; dy: the large one's gradient; dx: its initial value
};
std::vector<UpsampleCase> upsample_cases() {
  Random random(61);
  std::vector<UpsampleCase> cases;
  for (Shape4 s : {Shape4{1, 1, 1, 1}, Shape4{2, 3, 5, 7}, Shape4{4, 16, 20, 20}}) {
    UpsampleCase c;
    c.x = random.uniform(s, -3, 3);
    c.dx = random.uniform(s, -3, 3);
    c.dy = random.uniform({s.n, s.c, 2 * s.h, 2 * s.w}, -3, 3);
    cases.push_back(c);
  }
  return cases;
}

// Channel slices: the forward upsamples channels 1..2 of a 3 x 6 x 9 x 11 map into channels 3..4
// of the output, the backward adds dy's channels 0..3 into dx's 2..5.
UpsampleCase upsample_slice_case() {
  Random random(62);
  const Shape4 small{3, 6, 9, 11}, big{3, 6, 18, 22};
  UpsampleCase c;
  c.x = random.uniform(small, -3, 3);
  c.dx = random.uniform(small, -3, 3);
  c.dy = random.uniform(big, -3, 3);
  return c;
}

double check_upsample_forward(const Device& dut) {
  const double dense = worst_over(upsample_cases(), [&](const UpsampleCase& c) {
    return compare_with_reference(dut, {c.x}, {poisoned(c.dy.shape())},
                                  []<class T>(Tensors& in, Tensors& out) {
                                    ops::upsample_nearest2x_forward<T>(as<T>(in[0]), as<T>(out[0]));
                                  });
  });
  const UpsampleCase c = upsample_slice_case();
  const double slices = compare_with_reference(
      dut, {c.x}, {poisoned(c.dy.shape())}, []<class T>(Tensors& in, Tensors& out) {
        ops::upsample_nearest2x_forward<T>(as<T>(in[0].channels(1, 3)),
                                           as<T>(out[0].channels(3, 5)));
        out[0].channels(0, 3).zero();  // on both sides
        out[0].channels(5, 6).zero();
      });
  return std::max(dense, slices);
}

// Added into dx, or written over it (`overwrite`: what the op writes starts poisoned, so that a
// value not written fails; the slice's other channels keep their values, which are compared).
double check_upsample_backward(const Device& dut, ops::GradientWrite write) {
  const bool overwrite = write == ops::GradientWrite::overwrite;
  const double dense = worst_over(upsample_cases(), [&](const UpsampleCase& c) {
    return compare_with_cpu(
        dut, {c.dy}, {overwrite ? poisoned(c.dx.shape()) : c.dx}, [&](Tensors& in, Tensors& out) {
          ops::upsample_nearest2x_backward<float>(as<float>(in[0]), as<float>(out[0]), write);
        });
  });
  const UpsampleCase c = upsample_slice_case();
  const double slices = compare_with_cpu(
      dut, {c.dy}, {overwrite ? poisoned_channels(c.dx, 2, 6) : c.dx},
      [&](Tensors& in, Tensors& out) {
        ops::upsample_nearest2x_backward<float>(as<float>(in[0].channels(0, 4)),
                                                as<float>(out[0].channels(2, 6)), write);
      });
  return std::max(dense, slices);
}

}  // namespace

std::vector<Check> pool_checks() {
  return {
      {"pool+upsample", "maxpool2d_forward (ties, slices)", kExact, check_maxpool_forward},
      {"pool+upsample", "maxpool2d_backward (ties, slices)", kExact, check_maxpool_backward},
      {"pool+upsample", "maxpool2d_chain3_forward (SPPF)", kExact, check_sppf_chain},
      {"pool+upsample", "upsample_nearest2x_forward (+ slices)", kExact, check_upsample_forward},
      {"pool+upsample", "upsample_nearest2x_backward (+ slices)", kExact,
       [](const Device& dut) { return check_upsample_backward(dut, ops::GradientWrite::add); }},
      {"pool+upsample", "upsample_nearest2x_backward write+slices", kExact,
       [](const Device& dut) {
         return check_upsample_backward(dut, ops::GradientWrite::overwrite);
       }},
  };
}

}  // namespace bareyolo::selftest
