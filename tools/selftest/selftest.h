// tools/selftest/selftest.h — `bareyolo selftest`'s checks: do every op, the loss, the decode,
// NMS and a few training steps compute on this machine's GPUs what the CPU reference computes?
// They are also the CUDA test cases (tests/cuda/selftest.cpp runs each group on cuda:0): one
// harness, one error measure and one set of tolerances for every comparison of a device with
// the CPU.
//
// A check runs one op on a device under test (DUT) in the op's own dtype, from random inputs
// (never all zeros), and compares it with the CPU reference: in double precision where the op
// has a double form (the CPU kernels take double), else the CPU's op in the same dtype (the bf16
// ops, which are defined as float math rounded to bf16, the Detect decode and NMS). Outputs an
// op overwrites start as NaN on the DUT and the CPU, so an element it fails to write shows up as
// a non-finite error; outputs it accumulates into (backward ops, running statistics, optimizer
// state) start random. On a GPU the DUT is cuda:N. Anywhere else the CPU's own kernels can be
// the DUT, which is how CI exercises every check's inputs, harness and tolerances on every
// commit (tests/unit/selftest.cpp): float against double, and for the checks without a double
// form the CPU against itself, which still runs their inputs, poisoning and comparison.
//
// The error of a DUT output against its reference is the largest
//   |dut_i - ref_i| / max(|ref_i|, rms(ref))
// over its elements: relative for elements at least as large as the output's root mean square,
// and absolute in units of that RMS below it (an element near zero, the remainder of a
// cancelling sum, has no meaningful relative error). A non-finite element is an infinite error.
// A check's error is the worst over its outputs (and over its cases, where it has several); it
// passes when error <= tolerance. The tolerances are derived at the top of selftest.cpp.
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

// Runs on_dut on copies of `inputs` and `outputs` on `dut`, and on_reference on copies on the
// CPU with every float tensor in double (other dtypes, such as the u8 optimizer groups, as they
// are); returns the worst max_error over the outputs. `inputs` and `outputs` are host tensors:
// the outputs' initial values (NaN for the outputs the op overwrites; see poisoned()).
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

// For an op with no double form: `op` on copies on `dut` and on the CPU, every tensor in its
// own dtype; returns the worst max_error over the outputs, as compare_with_reference.
double compare_with_cpu(const Device& dut, const Tensors& inputs, const Tensors& outputs,
                        const TensorOp& op);

// A host tensor of NaN (f32, f64 or bf16): the initial value of an output the op must overwrite.
Tensor poisoned(Shape4 shape, DType dtype = DType::f32);

struct Check {
  std::string group;  // the report's line: "convolution", "batchnorm", ...
  std::string name;   // the op, as kernels/ops.h (or the module that runs it) names it, and
                      // the variant or cases it runs where the group has several
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

// Every op check, in the report's order, by group: elementwise; convolution (cuDNN and GEMM
// paths, float and TF32); batchnorm (SyncBN's phases, training, evaluation); bn+silu (the fused
// ops and the ConvBnSilu layer); pool+upsample; optimizer; bf16 (conversions and every
// activation op on bf16 views); detect (decode, NMS); loss; training (the tiny model,
// models/yolov5-tiny.yaml: one training step's gradients and three SGD steps' losses).
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
