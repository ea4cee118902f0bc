// tests/unit/selftest.cpp — `bareyolo selftest`'s checks (tools/selftest/selftest.h), which are
// also the CUDA test cases, with the CPU's kernels as the device under test, as CI runs them
// without a GPU: every check of the table passes, and those with a double reference compare two
// different computations (float against double, not one computation with itself); a wrong
// result, an output left unwritten, a too-tight tolerance and a check that throws each fail
// under their names, in the report and in the verdict line; a check's convolution path and TF32
// come back as they were, also when it throws; the grouped report of eight GPUs fits one screen.
// And the NCCL half's collective checks
// (tools/selftest/nccl_checks.h) on the one-rank communicator: they pass, and catch a
// communicator that returns a wrong sum (on several TCP ranks: tests/dist/selftest.cpp).
#include "tools/selftest/selftest.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <sstream>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/ops.h"
#include "tests/support/testing.h"
#include "tools/selftest/convolution_settings.h"
#include "tools/selftest/nccl_checks.h"

using namespace bareyolo;
using namespace bareyolo::selftest;

namespace {

std::vector<CheckResult> run_on_cpu(const std::vector<Check>& checks) {
  return run_checks(checks, {Device::cpu()});
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

const Check& table_check(const std::string& name) {
  const auto& checks = op_checks();
  const auto found =
      std::find_if(checks.begin(), checks.end(), [&](const Check& c) { return c.name == name; });
  REQUIRE(found != checks.end());
  return *found;
}

}  // namespace

TEST_CASE("every selftest check passes with the CPU's kernels as the device under test") {
  const std::vector<CheckResult> results = run_on_cpu(op_checks());
  int rounded = 0;
  std::set<std::string> names;
  for (const CheckResult& r : results) {
    CAPTURE(r.name);
    CAPTURE(r.error);
    CAPTURE(r.failure);
    CHECK(r.passed);
    CHECK(r.error <= r.tolerance);
    CHECK(names.insert(r.name).second);  // the verdict names checks: each name once
    // The report's columns: a group's line naming any check on cuda:N stays within 100.
    CHECK(r.name.size() <= 40);
    rounded += r.error > 0 ? 1 : 0;
  }
  // Float against double: every check with a double reference that does arithmetic sees float's
  // rounding. Exact on the CPU by design are only: the 36 bf16 checks and the 3 detect checks,
  // whose reference is the CPU's own op in the same dtype (they have no double form); the 6
  // pooling and upsampling checks, which move or compare values (exact even in double) or
  // compare their backward with the CPU's float one; sum_of_squares, whose float squares are
  // exact in double and summed in the same order; and the loss's 2 value checks, whose terms
  // are evaluated in double on both sides. If more were exact, the harness would be comparing
  // a computation with itself.
  constexpr int kExactOnTheCpu = 36 + 3 + 6 + 1 + 2;
  CHECK(rounded >= int(results.size()) - kExactOnTheCpu);
  CHECK(verdict_line(results) ==
        "selftest: PASS (" + std::to_string(results.size()) + " checks on cpu)");
  const std::string report = format_report(results);
  CHECK(report.find("FAIL") == std::string::npos);
  for (const char* group : {"elementwise", "convolution", "batchnorm", "bn+silu", "pool+upsample",
                            "optimizer", "bf16", "detect", "loss", "training"})
    CHECK_MESSAGE(report.find(std::string("\n") + group + " ") != std::string::npos, group);
}

TEST_CASE("a wrong result, an unwritten output, a tight tolerance and a throw fail by name") {
  testing::Rng rng(5);
  const Shape4 shape{2, 3, 4, 5};
  const Tensor x =
      Tensor::from_vector(testing::random_vector<float>(rng, shape.numel(), -4, 4), shape);
  const auto silu = []<class T>(Tensors& in, Tensors& out) {
    ops::silu_forward<T>(in[0].view<T>(), out[0].view<T>());
  };
  const TensorOp reference = [&](Tensors& in, Tensors& out) { silu.operator()<double>(in, out); };
  // The DUT's silu with every output 0.1% too large, or with its second image left unwritten.
  const TensorOp too_large = [&](Tensors& in, Tensors& out) {
    silu.operator()<float>(in, out);
    std::vector<float> values = out[0].to_vector<float>();
    for (float& v : values) v *= 1.001f;
    out[0].copy_from(Tensor::from_vector(values, out[0].shape(), out[0].device()));
  };
  const TensorOp first_image_only = [&](Tensors& in, Tensors& out) {
    Tensor first = out[0].images(0, 1);
    ops::silu_forward<float>(in[0].images(0, 1).view<float>(), first.view<float>());
  };
  Check too_tight = table_check("silu_forward");
  too_tight.name = "silu_forward at tolerance 0";
  too_tight.tolerance = 0;
  const std::vector<Check> checks = {
      {"test", "silu 0.1% too large", 1e-5,
       [&](const Device& dut) {
         return compare_with_reference(dut, {x}, {poisoned(shape)}, too_large, reference);
       }},
      {"test", "silu of the first image only", 1e-5,
       [&](const Device& dut) {
         return compare_with_reference(dut, {x}, {poisoned(shape)}, first_image_only, reference);
       }},
      too_tight,
      {"test", "a check that throws", 1,
       [](const Device&) -> double { throw std::runtime_error("conv2d: no algorithm fits"); }},
      {"test", "silu", 1e-5,
       [&](const Device& dut) {
         return compare_with_reference(dut, {x}, {poisoned(shape)}, silu);
       }},
      // Without a double form the CPU as the DUT runs the same op on both sides: an output it
      // leaves unwritten is NaN on both, and still fails.
      {"test", "bf16 silu of the first image only", 1e-2,
       [&](const Device& dut) {
         return compare_with_cpu(dut, {x.converted(DType::bf16)}, {poisoned(shape, DType::bf16)},
                                 [](Tensors& in, Tensors& out) {
                                   Tensor first = out[0].images(0, 1);
                                   ops::silu_forward<bf16>(in[0].images(0, 1).view<bf16>(),
                                                           first.view<bf16>());
                                 });
       }},
  };
  const std::vector<CheckResult> results = run_on_cpu(checks);
  REQUIRE(results.size() == 6);
  // Relative (scale 0): at doctest's scale 1, epsilon 1e-3 also let anything in [0, 2e-3] pass.
  CHECK(results[0].error == doctest::Approx(1e-3).scale(0).epsilon(1e-3));
  CHECK(std::isinf(results[1].error));
  CHECK(results[2].error > 0);
  CHECK(results[3].failure == "conv2d: no algorithm fits");
  for (size_t i = 0; i < 4; ++i) CHECK_FALSE(results[i].passed);
  CHECK(results[4].passed);
  CHECK(std::isinf(results[5].error));
  CHECK_FALSE(results[5].passed);
  CHECK_FALSE(all_passed(results));

  const std::string report = format_report(results);
  CHECK(report.find("FAIL silu 0.1% too large on cpu: error 1.0e-03 > tolerance 1.0e-05") !=
        std::string::npos);
  CHECK(report.find("FAIL silu of the first image only on cpu: error inf (a non-finite") !=
        std::string::npos);
  CHECK(report.find("FAIL silu_forward at tolerance 0 on cpu: error ") != std::string::npos);
  CHECK(report.find("FAIL a check that throws on cpu: threw: conv2d: no algorithm fits") !=
        std::string::npos);
  CHECK(report.find("FAIL silu on cpu") == std::string::npos);
  CHECK(verdict_line(results) ==
        "selftest: FAIL (5 of 6 checks failed: silu 0.1% too large on cpu, silu of the first "
        "image only on cpu, silu_forward at tolerance 0 on cpu, a check that throws on cpu, bf16 "
        "silu of the first image only on cpu)");
}

TEST_CASE("the convolution checks put the path and TF32 back, also when a check throws") {
  // A build without CUDA records both settings (the CPU's kernels ignore them). The other
  // settings than the defaults for this test, and the defaults back after it.
  const ConvolutionSettings not_the_defaults(cuda::ConvPath::gemm, true);
  std::vector<Check> convolutions;
  for (const Check& check : op_checks())
    if (check.group == "convolution") convolutions.push_back(check);
  REQUIRE(convolutions.size() == 20);  // 5 ops (backward data adds, writes) x 2 paths x float, TF32
  CHECK(all_passed(run_on_cpu(convolutions)));
  CHECK(cuda::conv_path() == cuda::ConvPath::gemm);
  CHECK(cuda::tf32_enabled());
  CHECK_THROWS_AS(
      [] {
        const ConvolutionSettings settings(cuda::ConvPath::cudnn, false);
        CHECK(cuda::conv_path() == cuda::ConvPath::cudnn);
        CHECK_FALSE(cuda::tf32_enabled());
        throw std::runtime_error("a check that fails half-way");
      }(),
      std::runtime_error);
  CHECK(cuda::conv_path() == cuda::ConvPath::gemm);
  CHECK(cuda::tf32_enabled());
}

TEST_CASE("the verdict names five failures and counts the rest") {
  std::vector<CheckResult> results(9);
  for (size_t i = 0; i < results.size(); ++i) {
    results[i].name = "check " + std::to_string(i);
    results[i].device = Device::cuda(int(i % 2));
    results[i].passed = i == 0;
  }
  CHECK(verdict_line(results) ==
        "selftest: FAIL (8 of 9 checks failed: check 1 on cuda:1, check 2 on cuda:0, check 3 on "
        "cuda:1, check 4 on cuda:0, check 5 on cuda:1 and 3 more)");
}

TEST_CASE("the grouped report of eight GPUs and their NCCL ranks fits one screen") {
  const std::vector<CheckResult> on_cpu = run_on_cpu(op_checks());
  std::vector<CheckResult> results;
  for (int gpu = 0; gpu < 8; ++gpu) {
    CheckResult nccl;
    nccl.group = "nccl";
    nccl.name = "collectives, rank " + std::to_string(gpu) + " of 8";
    nccl.device = Device::cuda(gpu);
    nccl.passed = true;
    results.push_back(nccl);
  }
  for (int gpu = 0; gpu < 8; ++gpu)
    for (CheckResult r : on_cpu) {
      r.device = Device::cuda(gpu);
      results.push_back(r);
    }
  const std::vector<std::string> lines = lines_of(format_report(results));
  CHECK(lines.size() <= 12);  // a header and one line per group
  for (const std::string& line : lines) CHECK(line.size() <= 100);
  CHECK(verdict_line(results) ==
        "selftest: PASS (" + std::to_string(results.size()) +
            " checks on cuda:0, cuda:1, cuda:2, cuda:3, cuda:4, cuda:5, cuda:6, cuda:7)");
  // --verbose: a line per check.
  CHECK(lines_of(format_report(on_cpu, true)).size() == on_cpu.size() + 1);
}

namespace {

// A one-rank communicator whose allreduce adds 1/2 to the first element of a host float buffer:
// a backend with a wrong sum.
class OffByHalf final : public dist::Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  dist::Backend backend() const override { return dist::Backend::tcp; }
  dist::WorkHandle allreduce(dist::CommBuffer buffer, dist::ReduceOp op,
                             std::string_view tag) override {
    if (buffer.count > 0 && buffer.dtype == DType::f32) static_cast<float*>(buffer.data)[0] += 0.5f;
    return one_rank_->allreduce(buffer, op, tag);
  }
  dist::WorkHandle broadcast(dist::CommBuffer buffer, int root, std::string_view tag) override {
    return one_rank_->broadcast(buffer, root, tag);
  }
  dist::WorkHandle allgather(dist::CommBuffer send, dist::CommBuffer recv,
                             std::string_view tag) override {
    return one_rank_->allgather(send, recv, tag);
  }
  dist::WorkHandle barrier(std::string_view tag) override { return one_rank_->barrier(tag); }

 private:
  std::unique_ptr<dist::Communicator> one_rank_ = dist::make_single_rank_communicator();
};

}  // namespace

TEST_CASE("the selftest's collective checks pass on one rank and catch a wrong sum") {
  const std::unique_ptr<dist::Communicator> one_rank = dist::make_single_rank_communicator();
  // Per dtype: 4 counts x (3 allreduces, 1 broadcast, 1 allgather); and the barrier.
  CHECK(check_collectives(*one_rank, Device::cpu()) == 2 * 4 * 5 + 1);
  OffByHalf wrong;
  CHECK_THROWS_WITH_AS(check_collectives(wrong, Device::cpu()),
                       doctest::Contains("allreduce sum of 1 f32: element 0 of 1 is "),
                       std::runtime_error);
}
