// tools/selftest/selftest.cpp — see selftest.h: the harness (compare a DUT with the reference),
// running the table of checks (kernel_checks.cpp, model_checks.cpp), and the
// report.
//
// Tolerances, for float against double from the same float inputs (the error is relative,
// floored at the output's RMS, as selftest.h defines it). A float sum of m terms in any order is
// within about m^1.5 float epsilons (6e-8) of the exact one in that unit, and typically within
// a few; a wrong index, a missed term or an unwritten element errs by a whole term (1e-2 and
// more) or is non-finite. So:
//  - 0 for what only moves or compares values (max pooling, upsampling, NMS): any correct
//    device computes them exactly;
//  - 1e-6 for a few roundings per element (add, the optimizer's updates, scaling) and for the
//    sum of squares, which every device accumulates in double;
//  - 1e-5 for elementwise math through expf and log1pf (SiLU, sigmoid, BCE, the decode, the
//    loss: a GPU's are within 2 ulps of glibc's, and the formulas chain a few of them), and for
//    the pooling and upsampling gradients (sums of up to 25 and 4 terms);
//  - 1e-4 for sums over many terms in another order: convolutions (16 to 126 products) and
//    BatchNorm (126 values per channel, and its backward's cancelling differences);
//  - the tiny model: 1e-2 for one step's gradients, which pass through about 25 layers forward
//    and back, their BatchNorms over maps as small as 2x2 (the CPU's float kernels: 4.4e-4 of
//    double, measured), and 1e-3 for the losses of three Solver steps (the CPU's: 1.2e-5).
//    A kernel that is wrong, not just rounded differently, errs by whole terms in the gradients
//    it feeds.
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

double compare_with_reference(const Device& dut, const Tensors& inputs, const Tensors& outputs,
                              const TensorOp& on_dut, const TensorOp& on_reference) {
  Tensors dut_in, dut_out, reference_in, reference_out;
  for (const Tensor& t : inputs) {
    dut_in.push_back(t.to(dut));
    reference_in.push_back(in_double(t));
  }
  for (const Tensor& t : outputs) {
    dut_out.push_back(t.to(dut));
    reference_out.push_back(in_double(t));
  }
  on_reference(reference_in, reference_out);
  on_dut(dut_in, dut_out);
  double worst = 0;
  for (size_t i = 0; i < outputs.size(); ++i)
    worst = std::max(worst, max_error(dut_out[i].to_doubles(), reference_out[i].to_doubles()));
  return worst;
}

Tensor poisoned(Shape4 shape) {
  return Tensor::from_vector(
      std::vector<float>(size_t(shape.numel()), std::numeric_limits<float>::quiet_NaN()), shape);
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
    std::vector<Check> all = kernel_checks();
    for (Check& check : model_checks()) all.push_back(std::move(check));
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
