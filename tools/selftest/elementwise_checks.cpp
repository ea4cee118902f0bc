// tools/selftest/elementwise_checks.cpp — the elementwise ops in float against their double
// reference (see selftest.h; tolerances: the top of selftest.cpp): SiLU, add, sigmoid and
// BCE-with-logits, on a single element, odd sizes and larger maps, and on channel slices (strided
// batches, as Concat's zero-copy inputs and outputs are).
#include <vector>

#include "kernels/ops.h"
#include "tools/selftest/checks.h"

namespace bareyolo::selftest {

namespace {

// ---- SiLU and add ----------------------------------------------------------------------------

struct SiluCase {
  Tensor x, dy, dx;  // dx: the backward's initial value, which it adds to
};
std::vector<SiluCase> silu_cases() {
  Random random(41);
  std::vector<SiluCase> cases;
  for (Shape4 s : {Shape4{1, 1, 1, 1}, Shape4{2, 3, 5, 7}, Shape4{4, 16, 33, 17}})
    cases.push_back({random.uniform(s, -3, 3), random.uniform(s, -3, 3), random.uniform(s, -3, 3)});
  return cases;
}

double check_silu_forward(const Device& dut) {
  return worst_over(silu_cases(), [&](const SiluCase& c) {
    return compare_with_reference(dut, {c.x}, {poisoned(c.x.shape())},
                                  []<class T>(Tensors& in, Tensors& out) {
                                    ops::silu_forward<T>(as<T>(in[0]), as<T>(out[0]));
                                  });
  });
}

double check_silu_backward(const Device& dut) {
  return worst_over(silu_cases(), [&](const SiluCase& c) {
    return compare_with_reference(dut, {c.x, c.dy}, {c.dx}, []<class T>(Tensors& in, Tensors& out) {
      ops::silu_backward<T>(as<T>(in[0]), as<T>(in[1]), as<T>(out[0]));
    });
  });
}

// Add on channel slices of a 3 x 8 x 9 x 11 map.
struct AddCase {
  Tensor a, b, dy, da, db;
};
AddCase add_case() {
  Random random(42);
  const Shape4 parent{3, 8, 9, 11};
  return {random.uniform(parent, -3, 3), random.uniform(parent, -3, 3),
          random.uniform(parent, -3, 3), random.uniform(parent, -3, 3),
          random.uniform(parent, -3, 3)};
}

double check_add_forward(const Device& dut) {
  const AddCase c = add_case();
  return compare_with_reference(
      dut, {c.a, c.b}, {poisoned(c.a.shape())}, []<class T>(Tensors& in, Tensors& out) {
        // Channels 2..4 of a and b into channels 4..6 of the output;
        // the channels it does not write are zeroed on both sides.
        ops::add_forward<T>(as<T>(in[0].channels(2, 5)), as<T>(in[1].channels(2, 5)),
                            as<T>(out[0].channels(4, 7)));
        out[0].channels(0, 4).zero();
        out[0].channels(7, 8).zero();
      });
}

double check_add_backward(const Device& dut) {
  const AddCase c = add_case();
  return compare_with_reference(dut, {c.dy}, {c.da, c.db}, []<class T>(Tensors& in, Tensors& out) {
    ops::add_backward<T>(as<T>(in[0]), as<T>(out[0]), as<T>(out[1]));
  });
}

// ---- sigmoid and BCE-with-logits: logits up to |30|, where a naive log(sigmoid(x)) overflows --

// Shapes up to a level of YOLOv5's head (255 channels: 3 anchors x 85 outputs).
struct SigmoidCase {
  Tensor x, y, dy, dx;  // x: logits; y: sigmoid values in (0, 1); dx: the backward's start
};
std::vector<SigmoidCase> sigmoid_cases() {
  Random random(71);
  std::vector<SigmoidCase> cases;
  for (Shape4 s : {Shape4{1, 1, 1, 1}, Shape4{2, 3, 5, 7}, Shape4{3, 255, 20, 20}}) {
    SigmoidCase c;
    c.x = random.uniform(s, -30, 30);
    c.y = random.uniform(s, 0, 1);
    c.dx = random.uniform(s, -3, 3);
    c.dy = random.uniform(s, -3, 3);
    cases.push_back(c);
  }
  return cases;
}

double check_sigmoid_forward(const Device& dut) {
  return worst_over(sigmoid_cases(), [&](const SigmoidCase& c) {
    return compare_with_reference(dut, {c.x}, {poisoned(c.x.shape())},
                                  []<class T>(Tensors& in, Tensors& out) {
                                    ops::sigmoid_forward<T>(as<T>(in[0]), as<T>(out[0]));
                                  });
  });
}

double check_sigmoid_backward(const Device& dut) {
  return worst_over(sigmoid_cases(), [&](const SigmoidCase& c) {
    return compare_with_reference(dut, {c.y, c.dy}, {c.dx}, []<class T>(Tensors& in, Tensors& out) {
      ops::sigmoid_backward<T>(as<T>(in[0]), as<T>(in[1]), as<T>(out[0]));
    });
  });
}

// Soft targets in [0, 1]; pos_weight 1 and 2.5 (YOLOv5's is a hyperparameter).
struct BceCase {
  double pos_weight = 1;
  Tensor x, target, dloss, dx;
};
std::vector<BceCase> bce_cases() {
  Random random(72);
  std::vector<BceCase> cases;
  for (double pos_weight : {1.0, 2.5})
    for (Shape4 s : {Shape4{1, 1, 1, 1}, Shape4{2, 3, 5, 7}, Shape4{3, 85, 20, 20}}) {
      BceCase c;
      c.pos_weight = pos_weight;
      c.x = random.uniform(s, -30, 30);
      c.target = random.uniform(s, 0, 1);
      c.dx = random.uniform(s, -3, 3);
      c.dloss = random.uniform(s, -3, 3);
      cases.push_back(c);
    }
  return cases;
}

double check_bce_forward(const Device& dut) {
  const double dense = worst_over(bce_cases(), [&](const BceCase& c) {
    return compare_with_reference(dut, {c.x, c.target}, {poisoned(c.x.shape())},
                                  [&]<class T>(Tensors& in, Tensors& out) {
                                    ops::bce_with_logits_forward<T>(as<T>(in[0]), as<T>(in[1]),
                                                                    T(c.pos_weight), as<T>(out[0]));
                                  });
  });
  // Channel slices: the loss of logits 5..11 against targets 1..7 into channels 0..6; the
  // channels it does not write are zeroed on both sides.
  Random random(73);
  const Shape4 parent{4, 12, 6, 5};
  const Tensor x = random.uniform(parent, -8, 8), target = random.uniform(parent, 0, 1);
  const double slices = compare_with_reference(
      dut, {x, target}, {poisoned(parent)}, []<class T>(Tensors& in, Tensors& out) {
        ops::bce_with_logits_forward<T>(as<T>(in[0].channels(5, 12)), as<T>(in[1].channels(1, 8)),
                                        T(1), as<T>(out[0].channels(0, 7)));
        out[0].channels(7, 12).zero();
      });
  return std::max(dense, slices);
}

double check_bce_backward(const Device& dut) {
  return worst_over(bce_cases(), [&](const BceCase& c) {
    return compare_with_reference(
        dut, {c.x, c.target, c.dloss}, {c.dx}, [&]<class T>(Tensors& in, Tensors& out) {
          ops::bce_with_logits_backward<T>(as<T>(in[0]), as<T>(in[1]), T(c.pos_weight),
                                           as<T>(in[2]), as<T>(out[0]));
        });
  });
}

}  // namespace

std::vector<Check> elementwise_checks() {
  return {
      {"elementwise", "silu_forward", kTranscendental, check_silu_forward},
      {"elementwise", "silu_backward", kTranscendental, check_silu_backward},
      {"elementwise", "add_forward (channel slices)", kFewRoundings, check_add_forward},
      {"elementwise", "add_backward", kFewRoundings, check_add_backward},
      {"elementwise", "sigmoid_forward", kTranscendental, check_sigmoid_forward},
      {"elementwise", "sigmoid_backward", kTranscendental, check_sigmoid_backward},
      {"elementwise", "bce_with_logits_forward (+ slices)", kTranscendental, check_bce_forward},
      {"elementwise", "bce_with_logits_backward", kTranscendental, check_bce_backward},
  };
}

}  // namespace bareyolo::selftest
