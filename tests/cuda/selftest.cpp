// tests/cuda/selftest.cpp — the CUDA-vs-CPU test cases: the selftest's table
// (tools/selftest/selftest.h), whose checks are every numerical comparison of a CUDA kernel with
// its CPU reference, run on cuda:0, one case per group, so that ctest names the group that
// failed and the log names each failing check with its error and tolerance (the whole group's
// table is printed too). The same checks run with the CPU as the device under test in CI
// (tests/unit/selftest.cpp) and on every GPU in `bareyolo selftest`. Each case also leaves the
// convolution path and TF32 as it found them. And the collective checks of
// tools/selftest/nccl_checks.h on a one-GPU NCCL process group (the command runs those in forked
// workers; this runner has initialised CUDA, so it joins the group in-process).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/distributed/launch/process_group.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/runtime/runtime.h"
#include "tools/selftest/nccl_checks.h"
#include "tools/selftest/selftest.h"

using namespace bareyolo;
using namespace bareyolo::selftest;

namespace {

// The groups the cases below run, in the table's order.
const std::vector<std::string> kGroups = {"elementwise",   "convolution", "batchnorm", "bn+silu",
                                          "pool+upsample", "optimizer",   "bf16",      "detect",
                                          "loss",          "training"};

void check_group_on_cuda0(const std::string& group) {
  std::vector<Check> checks;
  for (const Check& check : op_checks())
    if (check.group == group) checks.push_back(check);
  REQUIRE_MESSAGE(!checks.empty(), "the selftest has no group " << group);
  const cuda::ConvPath path = cuda::conv_path();
  const bool tf32 = cuda::tf32_enabled();
  const std::vector<CheckResult> results = run_checks(checks, {Device::cuda(0)});
  MESSAGE(format_report(results, true));
  for (const CheckResult& r : results) CHECK_MESSAGE(r.passed, format_report({r}));
  CHECK(cuda::conv_path() == path);
  CHECK(cuda::tf32_enabled() == tf32);
}

}  // namespace

TEST_CASE("every group of the selftest's table has a case here") {
  for (const Check& check : op_checks())
    CHECK_MESSAGE(std::find(kGroups.begin(), kGroups.end(), check.group) != kGroups.end(),
                  check.group);
}

TEST_CASE("selftest elementwise checks pass on cuda:0") { check_group_on_cuda0("elementwise"); }
TEST_CASE("selftest convolution checks pass on cuda:0") { check_group_on_cuda0("convolution"); }
TEST_CASE("selftest batchnorm checks pass on cuda:0") { check_group_on_cuda0("batchnorm"); }
TEST_CASE("selftest bn+silu checks pass on cuda:0") { check_group_on_cuda0("bn+silu"); }
TEST_CASE("selftest pool+upsample checks pass on cuda:0") { check_group_on_cuda0("pool+upsample"); }
TEST_CASE("selftest optimizer checks pass on cuda:0") { check_group_on_cuda0("optimizer"); }
TEST_CASE("selftest bf16 checks pass on cuda:0") { check_group_on_cuda0("bf16"); }
TEST_CASE("selftest detect checks pass on cuda:0") { check_group_on_cuda0("detect"); }
TEST_CASE("selftest loss checks pass on cuda:0") { check_group_on_cuda0("loss"); }
TEST_CASE("selftest training checks pass on cuda:0") { check_group_on_cuda0("training"); }

TEST_CASE("the selftest's collective checks hold on a one-GPU NCCL process group") {
  dist::LaunchEnv env;
  env.store_token = "selftest-cuda-test";
  dist::ProcessGroup group =
      dist::init_process_group(env, {.backend = dist::Backend::nccl, .device = Device::cuda(0)});
  REQUIRE(group.comm->backend() == dist::Backend::nccl);
  // Per dtype: 4 counts x (3 allreduces, 1 broadcast, 1 allgather); and the barrier.
  CHECK(check_collectives(*group.comm, Device::cuda(0)) == 2 * 4 * 5 + 1);
}
