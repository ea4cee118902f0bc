// tools/selftest/selftest.h — `bareyolo selftest`'s checks: do every op, the loss, the decode,
// NMS and a few training steps compute on this machine's GPUs what the CPU reference computes?
//
// A check runs one op on a device under test (DUT) and on the CPU reference in double precision
// (the CPU kernels take double), from the same random float inputs (never all zeros), and
// compares the two within a tolerance stated for float. Outputs an op overwrites start as NaN on
// both sides, so an element it fails to write shows up as a non-finite error; outputs it
// accumulates into (backward ops, running statistics, optimizer state) start random. On a GPU
// the DUT is cuda:N. Anywhere else the CPU's own float kernels can be the DUT, which is how CI
// exercises the harness, the inputs and the tolerances on every commit (tests/unit/selftest.cpp).
// Two checks have no double reference: the Detect decode and NMS compare with the CPU's float
// implementations (NMS exactly), which on the CPU as DUT are the code under test itself.
//
// The error of a DUT output against its reference is the largest
//   |dut_i - ref_i| / max(|ref_i|, rms(ref))
// over its elements: relative for elements at least as large as the output's root mean square,
// and absolute in units of that RMS below it (an element near zero, the remainder of a
// cancelling sum, has no meaningful relative error). A non-finite element is an infinite error.
// A check's error is the worst over its outputs (and over its cases, where it has several); it
// passes when error <= tolerance.
//
// The communicator half of the selftest (NCCL across the GPUs, in forked workers) is
// tools/selftest/nccl_checks.h; the command is tools/bareyolo/selftest_command.h.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace bareyolo::selftest {

// See the file comment.
double max_error(std::span<const double> dut, std::span<const double> reference);

using Tensors = std::vector<Tensor>;
// An op on tensors of one device and dtype: reads `in`, writes or accumulates into `out`.
using TensorOp = std::function<void(Tensors& in, Tensors& out)>;

// Runs on_dut on float copies of `inputs` and `outputs` on `dut`, and on_reference on double
// copies on the CPU; returns the worst max_error over the outputs. `inputs` and `outputs` are
// float host tensors: the outputs' initial values (NaN for the outputs the op overwrites; see
// poisoned()).
double compare_with_reference(const Device& dut, const Tensors& inputs, const Tensors& outputs,
                              const TensorOp& on_dut, const TensorOp& on_reference);

// The usual case: one op written once over the element type, as
//   []<class T>(Tensors& in, Tensors& out) { ops::silu_forward<T>(...); }
// run as Op<float> on the DUT and as Op<double> for the reference.
template <class Op>
double compare_with_reference(const Device& dut, const Tensors& inputs, const Tensors& outputs,
                              const Op& op) {
  return compare_with_reference(
      dut, inputs, outputs,
      [&](Tensors& in, Tensors& out) { op.template operator()<float>(in, out); },
      [&](Tensors& in, Tensors& out) { op.template operator()<double>(in, out); });
}

// A float host tensor of NaN: the initial value of an output the op must overwrite.
Tensor poisoned(Shape4 shape);

struct Check {
  std::string group;  // the report's line: "convolution", "batchnorm", ...
  std::string name;   // the op, as kernels/ops.h (or the module that runs it) names it
  double tolerance = 0;
  // Runs the check on the DUT; returns its error (see the file comment). May throw.
  std::function<double(const Device& dut)> run;
};

struct CheckResult {
  std::string group, name;
  Device device;
  double error = 0, tolerance = 0;
  bool passed = false;
  std::string failure;  // what the check threw, or ""
};

// Every op check, in the report's order: elementwise, convolution (cuDNN and GEMM paths),
// batchnorm (+ SyncBN's phases), fused BN + SiLU, pooling and upsampling, optimizer, Detect
// decode and NMS, the YOLOv5 loss, and the tiny model (models/yolov5-tiny.yaml): one training
// step's gradients and three SGD steps' losses.
const std::vector<Check>& op_checks();

// Runs every check on every device in turn. A check that throws fails with the exception's text.
std::vector<CheckResult> run_checks(const std::vector<Check>& checks,
                                    const std::vector<Device>& devices);

// The table: one line per group (checks, failures, the worst error relative to its tolerance),
// then every failure in full; with every_row, one line per check instead of per group.
std::string format_report(const std::vector<CheckResult>& results, bool every_row = false);

// "selftest: PASS (N checks on cuda:0, cuda:1)" or
// "selftest: FAIL (k of N checks failed: name on device, ...)".
std::string verdict_line(const std::vector<CheckResult>& results);
bool all_passed(const std::vector<CheckResult>& results);

}  // namespace bareyolo::selftest
