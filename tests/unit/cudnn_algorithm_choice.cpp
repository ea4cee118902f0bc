// tests/unit/cudnn_algorithm_choice.cpp — which of cuDNN's ranked convolution algorithms the
// CUDA convolution runs (kernels/cuda/cudnn_algorithm_choice.h), on made-up rankings, so it runs
// without a GPU: the first deterministic supported algorithm whose workspace fits, the others as
// fallbacks in cuDNN's order, non-deterministic ones last (or in cuDNN's order when determinism
// is not asked for), the workspace cap, the math type a descriptor asks for, and which candidate
// timing keeps.
#include <doctest/doctest.h>

#include <cstddef>
#include <optional>
#include <vector>

#include "kernels/cuda/cudnn_algorithm_choice.h"

using bareyolo::cuda::AlgorithmCandidate;
using bareyolo::cuda::algorithms_to_try;
using bareyolo::cuda::conv_workspace_cap;
using bareyolo::cuda::kMaxConvWorkspace;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

AlgorithmCandidate candidate(int algorithm, bool supported, bool deterministic, size_t workspace) {
  return {algorithm, 3, supported, deterministic, workspace};
}

std::vector<int> algorithms(const std::vector<AlgorithmCandidate>& candidates) {
  std::vector<int> ids;
  for (const AlgorithmCandidate& c : candidates) ids.push_back(c.algorithm);
  return ids;
}

}  // namespace

TEST_CASE("conv algorithm choice: the best-ranked deterministic supported one that fits") {
  // As cuDNN ranks backward-filter algorithms at small channel counts: the atomics-based
  // ALGO_0 and ALGO_3 first, ALGO_1 deterministic after them.
  const std::vector<AlgorithmCandidate> ranked = {
      candidate(0, true, false, 0), candidate(3, true, false, kMiB), candidate(1, true, true, kMiB),
      candidate(5, true, true, 0)};
  const std::vector<AlgorithmCandidate> order = algorithms_to_try(ranked, 64 * kMiB);
  CHECK(algorithms(order) == std::vector<int>{1, 5, 0, 3});
  CHECK(order.front().workspace == kMiB);
  CHECK(order.front().math == 3);  // carried through: the descriptor must be set to it
}

TEST_CASE("conv algorithm choice: unsupported candidates are never run") {
  const std::vector<AlgorithmCandidate> ranked = {
      candidate(7, false, true, 0), candidate(2, true, true, 0), candidate(4, false, false, 0)};
  CHECK(algorithms(algorithms_to_try(ranked, kMiB)) == std::vector<int>{2});
}

TEST_CASE("conv algorithm choice: a workspace beyond the cap rules a candidate out") {
  const std::vector<AlgorithmCandidate> ranked = {candidate(6, true, true, 2 * kMiB),
                                                  candidate(1, true, true, kMiB),
                                                  candidate(0, true, true, kMiB + 1)};
  CHECK(algorithms(algorithms_to_try(ranked, kMiB)) == std::vector<int>{1});  // exactly the cap
  CHECK(algorithms(algorithms_to_try(ranked, 2 * kMiB)) == std::vector<int>{6, 1, 0});
  CHECK(algorithms(algorithms_to_try(ranked, 0)).empty());
}

TEST_CASE("conv algorithm choice: non-deterministic only when no deterministic one fits") {
  const std::vector<AlgorithmCandidate> ranked = {candidate(0, true, false, 0),
                                                  candidate(1, true, true, 8 * kMiB),
                                                  candidate(3, true, false, kMiB)};
  // With room for ALGO_1 it leads; without, the fastest non-deterministic one is the choice.
  CHECK(algorithms(algorithms_to_try(ranked, 8 * kMiB)) == std::vector<int>{1, 0, 3});
  CHECK(algorithms(algorithms_to_try(ranked, kMiB)) == std::vector<int>{0, 3});
}

TEST_CASE("conv algorithm choice: cuDNN's ranking alone when determinism is not asked for") {
  const std::vector<AlgorithmCandidate> ranked = {
      candidate(0, true, false, 0), candidate(7, false, true, 0), candidate(3, true, false, kMiB),
      candidate(1, true, true, 8 * kMiB), candidate(5, true, true, 0)};
  CHECK(algorithms(algorithms_to_try(ranked, 8 * kMiB, false)) == std::vector<int>{0, 3, 1, 5});
  CHECK(algorithms(algorithms_to_try(ranked, kMiB, false)) == std::vector<int>{0, 3, 5});
  CHECK(algorithms(algorithms_to_try(ranked, 8 * kMiB, true)) == std::vector<int>{1, 5, 0, 3});
}

TEST_CASE("conv algorithm choice: bf16 asks for tensor-op math, TF32 for default, float for FMA") {
  using bareyolo::cuda::convolution_math;
  using bareyolo::cuda::ConvolutionMath;
  CHECK(convolution_math(true, false) == ConvolutionMath::tensor_op);
  CHECK(convolution_math(true, true) == ConvolutionMath::tensor_op);
  CHECK(convolution_math(false, true) == ConvolutionMath::default_tf32);
  CHECK(convolution_math(false, false) == ConvolutionMath::fma);
}

TEST_CASE("conv algorithm choice: nothing to try when nothing is usable") {
  CHECK(algorithms_to_try({}, kMiB).empty());
  CHECK(algorithms_to_try({candidate(0, false, true, 0), candidate(1, false, false, 0)}, kMiB)
            .empty());
}

TEST_CASE("conv algorithm choice: the workspace cap is 1 GiB or half of what the device can give") {
  CHECK(kMaxConvWorkspace == size_t{1} << 30);
  CHECK(conv_workspace_cap(size_t{80} << 30, 0) == kMaxConvWorkspace);
  CHECK(conv_workspace_cap(600 * kMiB, 0) == 300 * kMiB);
  // The caching allocator's free blocks count: it returns them to the driver when needed.
  CHECK(conv_workspace_cap(100 * kMiB, 300 * kMiB) == 200 * kMiB);
  CHECK(conv_workspace_cap(0, 0) == 0);
}

TEST_CASE("conv algorithm choice: timed, the fastest deterministic one unless none ran") {
  using bareyolo::cuda::fastest_candidate;
  // The order algorithms_to_try gives: deterministic first, then the atomics-based ones.
  const std::vector<AlgorithmCandidate> order = {
      candidate(1, true, true, 0), candidate(5, true, true, 0), candidate(0, true, false, 0)};
  // The deterministic 5 beats 1; the faster non-deterministic 0 is not taken...
  CHECK(fastest_candidate(order, {2.0, 1.5, 0.5}, true) == size_t{1});
  // ...unless determinism is not asked for (--cudnn fast).
  CHECK(fastest_candidate(order, {2.0, 1.5, 0.5}, false) == size_t{2});
  // A refused candidate (no time) is never chosen; with every deterministic one refused, the
  // non-deterministic one runs.
  CHECK(fastest_candidate(order, {std::nullopt, 1.5, 0.5}, true) == size_t{1});
  CHECK(fastest_candidate(order, {std::nullopt, std::nullopt, 0.5}, true) == size_t{2});
  // A tie goes to cuDNN's better-ranked; nothing ran, nothing chosen; nothing timed, likewise.
  CHECK(fastest_candidate(order, {1.0, 1.0, 3.0}, true) == size_t{0});
  CHECK_FALSE(fastest_candidate(order, {std::nullopt, std::nullopt, std::nullopt}, false));
  CHECK_FALSE(fastest_candidate(order, {}, true));
}
