// tests/cuda/selftest.cpp — `bareyolo selftest`'s checks on cuda:0 (skipped without a GPU): every
// op check of tools/selftest/selftest.h passes, with the whole table printed (each check's error
// beside its tolerance), and leaves the convolution path as it found it; the collective checks of
// tools/selftest/nccl_checks.h hold on a one-GPU NCCL process group. (The command runs those in
// forked workers; this runner has initialised CUDA, so it joins the group in-process.)
#include "tools/selftest/selftest.h"
#include "engine/distributed/launch/process_group.h"
#include "kernels/cuda/cuda_ops.h"
#include "tests/cuda/cuda_testing.h"
#include "tools/selftest/nccl_checks.h"

using namespace bareyolo;
using namespace bareyolo::selftest;

TEST_CASE("every selftest op check passes on cuda:0") {
  const cuda::ConvPath path = cuda::conv_path();
  const std::vector<CheckResult> results = run_checks(op_checks(), {Device::cuda(0)});
  MESSAGE(format_report(results, true));
  for (const CheckResult& r : results) CHECK_MESSAGE(r.passed, format_report({r}));
  CHECK(verdict_line(results) ==
        "selftest: PASS (" + std::to_string(results.size()) + " checks on cuda:0)");
  CHECK(cuda::conv_path() == path);
}

TEST_CASE("the selftest's collective checks hold on a one-GPU NCCL process group") {
  dist::LaunchEnv env;
  env.store_token = "selftest-cuda-test";
  dist::ProcessGroup group =
      dist::init_process_group(env, {.backend = dist::Backend::nccl, .device = Device::cuda(0)});
  REQUIRE(group.comm->backend() == dist::Backend::nccl);
  // Per dtype: 4 counts x (3 allreduces, 1 broadcast, 1 allgather); and the barrier.
  CHECK(check_collectives(*group.comm, Device::cuda(0)) == 2 * 4 * 5 + 1);
}
