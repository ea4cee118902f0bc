// tools/selftest/selftest.cpp — see selftest.h: the harness (compare a DUT with the reference),
// running the table of checks (one file per group: <group>_checks.cpp), and the report.
//
// The tolerances (checks.h names them), in the error selftest.h defines: relative, floored at
// the output's RMS. u = 2^-24 (6e-8) is float's unit roundoff. A wrong index, a missed term or an
// unwritten element errs by a whole term (1e-2 and more) or is non-finite, far beyond each.
//  - kExact, 0: what only moves or compares values (max pooling, upsampling, SPPF's chain, the
//    bf16 conversions, which round to nearest-even on every device), exact against double too;
//    and, against the CPU's op in the same dtype, the pooling and upsampling backwards, which add
//    in the CPU's order, and NMS, which runs the host's float operations in the same order.
//  - kFewRoundings, 1e-6: a few roundings per element of values no larger than a few times the
//    result's RMS: add (one, u), the SGD, EMA and clip updates (under 10u).
//  - kTranscendental, 1e-5: elementwise math through expf and log1pf (SiLU, sigmoid, BCE, the
//    Detect decode and detect's boxes): a GPU's are within 2 ulps of glibc's and a formula
//    chains a few of them. BCE's forward cancels terms up to (1 + pos_weight) |x| = 105 into a
//    small loss: 4 float steps of that term are at most 2.9e-6 of max(|loss|, RMS) for these
//    inputs. The loss's gradients: each element a double rounded to float, added to a float.
//    Adam's step: the moment's float error (a few u) divided by sqrt of the second moment,
//    where a small one (here down to ~1e-3 of the first) magnifies it: 1.9e-6 measured.
//  - kFloatSums, 1e-4: sums over many terms in another order than the double reference's:
//    convolutions (32 to 288 products per output, up to 1980 per weight gradient), BatchNorm's
//    per-channel sums (up to 12800 values) and its backward's cancelling differences, the
//    ConvBnSilu layer. Rounding errors of a float sum of m terms are independent, so it errs by
//    about u sqrt(m) of its RMS-sized scale (7e-6 for m = 12800), and a device's blocked or tree
//    sums by less; the worst case, m u, is never approached by such sums.
//  - kLargeMeanMoments, 1e-3: the moments of x = 1000 + noise of spread ~1. A float Welford/Chan
//    update forms x - mean with up to half an ulp of 1000 (3e-5) of error against terms of size
//    ~1, so M2 errs by at most ~6e-5 relative; 1e-3 is what the former CUDA test allowed.
//  - kDoubleSums, 1e-12: the sum of squares into a double: float squares are exact in double,
//    and double sums of up to 2^20 of them in another order err by about 2^-53 sqrt(m) (1e-13).
//  - kDoubleLoss, 1e-10: the loss's values, whose every term both sides evaluate in double from
//    the same float inputs; only the order of the double sums differs, and a GPU's double exp,
//    log1p and atan may differ from glibc's by an ulp.
//  - kBf16Step, 2^-7: a bf16 op against the CPU's bf16 op (its definition: the float op on the
//    widened operands, each stored result rounded to bf16). A device's float result differs by
//    float rounding, so where it lies near the midpoint of two bf16 neighbours it may round to
//    the other: one bf16 step, 2^-7 of the value at most (bf16 keeps 8 significant bits), and
//    below the RMS at most 2^-7 of it. Per-channel float sums of bf16 ops are held to kFloatSums.
//  - kBf16TwoSteps, 2^-6: the bf16 convolution with a bias on cuDNN, which stores round(conv)
//    and adds the bias to that: half a step of |conv| beside the definition's one rounding of
//    conv + bias, and |conv| <= |y| + |bias| <= 1.35 max(|y|, RMS) here, so 2^-7 + 1.35 2^-8.
//    Its BatchNorm moments (of the stored y) come with it: the stored values differ by single
//    steps in either direction at random, which a mean or M2 over 270 or more values averages
//    down to ~1e-3 of their RMS.
//  - kTf32, 2^-5: float convolutions with TF32 on, where the tensor cores round each operand to
//    a 10-bit mantissa (2^-11 relative to nearest, 2^-10 when truncated), so each product errs
//    by at most 2^-9 of itself. The worst case, 2^-9 sum|products| / max(|y|, RMS), is 7e-2 for
//    these inputs, looser than what it should catch; but the products' errors are independent,
//    so a sum errs by at most 2^-9 / sqrt(3) (1.1e-3) of its RMS-sized scale per standard
//    deviation, 5.6e-3 at five of them over the ~10^5 outputs, plus a bias of at most 2^-10 where
//    the hardware truncates. 2^-5 leaves 4x for the transform-based algorithms (Winograd, FFT)
//    cuDNN may choose, whose transformed operands TF32 rounds too. A small slip can hide in
//    that; the same code in float (kFloatSums) catches it. A CPU has no TF32 and passes these
//    at float's error.
//  - the tiny model: kTinyGradients, 1e-2, for one step's gradients, which pass through about
//    25 layers forward and back, their BatchNorms over maps as small as 2x2 (the CPU's float
//    kernels: 4.4e-4 of double, measured), and kTinyLosses, 1e-3, for the losses of three Solver
//    steps (the CPU's: 1.2e-5). A kernel that is wrong, not just rounded differently, errs by
//    whole terms in the gradients it feeds.
#include "tools/selftest/selftest.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "tools/selftest/checks.h"

namespace bareyolo::selftest {

double max_error(std::span<const double> dut, std::span<const double> reference) {
  if (dut.size() != reference.size()) return kInfinity;
  double squares = 0;
  for (double r : reference) squares += r * r;
  const double rms = reference.empty() ? 0 : std::sqrt(squares / double(reference.size()));
  double worst = 0;
  for (size_t i = 0; i < dut.size(); ++i) {
    if (!std::isfinite(dut[i]) || !std::isfinite(reference[i])) return kInfinity;
    const double difference = std::fabs(dut[i] - reference[i]);
    if (difference == 0) continue;
    const double scale = std::max(std::fabs(reference[i]), rms);
    worst = std::max(worst, scale > 0 ? difference / scale : kInfinity);
  }
  return worst;
}

namespace {

// The reference's copy of a host tensor: a float tensor in double where the reference runs the
// op's double form, anything else as it is.
Tensor reference_copy(const Tensor& t, bool in_double_form) {
  return in_double_form && t.dtype() == DType::f32 ? in_double(t) : t.to(Device::cpu());
}

double compare(const Device& dut, const Tensors& inputs, const Tensors& outputs,
               const TensorOp& on_dut, const TensorOp& on_reference, bool in_double_form) {
  Tensors dut_in, dut_out, reference_in, reference_out;
  for (const Tensor& t : inputs) {
    dut_in.push_back(t.to(dut));
    reference_in.push_back(reference_copy(t, in_double_form));
  }
  for (const Tensor& t : outputs) {
    dut_out.push_back(t.to(dut));
    reference_out.push_back(reference_copy(t, in_double_form));
  }
  on_reference(reference_in, reference_out);
  on_dut(dut_in, dut_out);
  double worst = 0;
  for (size_t i = 0; i < outputs.size(); ++i)
    worst = std::max(worst, max_error(dut_out[i].to_doubles(), reference_out[i].to_doubles()));
  return worst;
}

}  // namespace

double compare_with_reference(const Device& dut, const Tensors& inputs, const Tensors& outputs,
                              const TensorOp& on_dut, const TensorOp& on_reference) {
  return compare(dut, inputs, outputs, on_dut, on_reference, true);
}

double compare_with_cpu(const Device& dut, const Tensors& inputs, const Tensors& outputs,
                        const TensorOp& op) {
  return compare(dut, inputs, outputs, op, op, false);
}

Tensor poisoned(Shape4 shape, DType dtype) {
  const size_t count = size_t(shape.numel());
  if (dtype == DType::f64)
    return Tensor::from_vector(std::vector<double>(count, std::numeric_limits<double>::quiet_NaN()),
                               shape);
  const Tensor nan = Tensor::from_vector(
      std::vector<float>(count, std::numeric_limits<float>::quiet_NaN()), shape);
  return dtype == DType::f32 ? nan : nan.converted(dtype);  // bf16 keeps a quiet NaN
}

Tensor poisoned_channels(const Tensor& t, int64_t begin, int64_t end) {
  Tensor copy = t.to(Device::cpu());
  const Shape4 s = t.shape();
  copy.channels(begin, end).copy_from(poisoned({s.n, end - begin, s.h, s.w}, t.dtype()));
  return copy;
}

namespace {

// ---- the report ------------------------------------------------------------------------------

std::string number(double value) {
  if (value == 0) return "0";
  if (std::isinf(value)) return "inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.1e", value);
  return text;
}

std::string label(const CheckResult& r) { return r.name + " on " + r.device.str(); }

// How far a result is into its tolerance (> 1: failed); the worst of a group is reported.
double severity(const CheckResult& r) {
  if (!r.passed) return kInfinity;
  return r.tolerance > 0 ? r.error / r.tolerance : 0;
}

std::string failure_text(const CheckResult& r) {
  if (!r.failure.empty()) return "FAIL " + label(r) + ": threw: " + r.failure;
  std::string error = number(r.error);
  if (std::isinf(r.error))
    error += " (a non-finite or missing element: an output left unwritten, or an overflow)";
  return "FAIL " + label(r) + ": error " + error + " > tolerance " + number(r.tolerance);
}

// One line of the report, printf-formatted.
std::string line(const char* format, auto... values) {
  std::string text(size_t(std::snprintf(nullptr, 0, format, values...)), '\0');
  std::snprintf(text.data(), text.size() + 1, format, values...);
  return text + "\n";
}

}  // namespace

const std::vector<Check>& op_checks() {
  static const std::vector<Check> checks = [] {
    std::vector<Check> all;
    for (const auto& part :
         {elementwise_checks, convolution_checks, batchnorm_checks, bn_silu_checks, pool_checks,
          optimizer_checks, bf16_checks, detect_checks, loss_checks, training_checks})
      for (Check& check : part()) all.push_back(std::move(check));
    return all;
  }();
  return checks;
}

std::vector<CheckResult> run_checks(const std::vector<Check>& checks,
                                    const std::vector<Device>& devices) {
  std::vector<CheckResult> results;
  for (const Device& device : devices)
    for (const Check& check : checks) {
      CheckResult r;
      r.group = check.group;
      r.name = check.name;
      r.device = device;
      r.tolerance = check.tolerance;
      try {
        r.error = check.run(device);
        r.passed = r.error <= check.tolerance;
      } catch (const std::exception& error) {
        r.failure = error.what();
      }
      results.push_back(std::move(r));
    }
  return results;
}

std::string format_report(const std::vector<CheckResult>& results, bool every_row) {
  std::string report;
  if (every_row) {
    report += line("%-4s  %-13s %-40s %-7s %8s %9s", "", "group", "check", "device", "error",
                   "tolerance");
    for (const CheckResult& r : results)
      report += line("%-4s  %-13s %-40s %-7s %8s %9s", r.passed ? "PASS" : "FAIL", r.group.c_str(),
                     r.name.c_str(), r.device.str().c_str(), number(r.error).c_str(),
                     number(r.tolerance).c_str());
  } else {
    report += line("%-13s %6s %6s  %s", "group", "checks", "failed",
                   "worst error (of its tolerance): check");
    std::vector<std::string> groups;
    for (const CheckResult& r : results)
      if (std::find(groups.begin(), groups.end(), r.group) == groups.end())
        groups.push_back(r.group);
    for (const std::string& group : groups) {
      int count = 0, failed = 0;
      const CheckResult* worst = nullptr;
      for (const CheckResult& r : results) {
        if (r.group != group) continue;
        ++count;
        failed += r.passed ? 0 : 1;
        if (!worst || severity(r) > severity(*worst)) worst = &r;
      }
      const std::string detail =
          !worst->failure.empty()
              ? "threw: " + label(*worst)
              : number(worst->error) + " (of " + number(worst->tolerance) + "): " + label(*worst);
      report += line("%-13s %6d %6d  %s", group.c_str(), count, failed, detail.c_str());
    }
  }
  for (const CheckResult& r : results)
    if (!r.passed) report += failure_text(r) + "\n";
  return report;
}

bool all_passed(const std::vector<CheckResult>& results) {
  return std::all_of(results.begin(), results.end(), [](const CheckResult& r) { return r.passed; });
}

std::string verdict_line(const std::vector<CheckResult>& results) {
  const std::string count = std::to_string(results.size());
  if (all_passed(results)) {
    std::vector<std::string> devices;
    for (const CheckResult& r : results)
      if (std::find(devices.begin(), devices.end(), r.device.str()) == devices.end())
        devices.push_back(r.device.str());
    std::string on;
    for (const std::string& d : devices) on += (on.empty() ? "" : ", ") + d;
    return "selftest: PASS (" + count + " checks on " + on + ")";
  }
  // The first few failures by name; the report above lists every one.
  constexpr size_t kNamed = 5;
  std::vector<std::string> failed;
  for (const CheckResult& r : results)
    if (!r.passed) failed.push_back(label(r));
  std::string names;
  for (size_t i = 0; i < std::min(failed.size(), kNamed); ++i) names += (i ? ", " : "") + failed[i];
  if (failed.size() > kNamed) names += " and " + std::to_string(failed.size() - kNamed) + " more";
  return "selftest: FAIL (" + std::to_string(failed.size()) + " of " + count +
         " checks failed: " + names + ")";
}

}  // namespace bareyolo::selftest
