// tests/cuda/channels_last.cpp — channels last on the GPU (kernels/view.h, --channels-last):
// copy_elements's kernel changes layouts and fills channel slices with the CPU's values, and the
// ops whose CUDA kernels take channels last as it is (kOpsTakingChannelsLastOnCuda, in the sets
// of tests/support/channels_last_ops.h: convolutions, BatchNorm, pools, upsampling, add, SiLU) give
// the CPU's NCHW values, the tiny model's channels-last steps copy no view for an op (and the
// Solver's first step says so when one does), and the KRSC weight rounding gives the CPU's bits.
// A whole training step in channels last against the CPU is tests/cuda/train_step.cpp's.
#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/nchw_adapter.h"
#include "kernels/ops.h"
#include "models/train/solver.h"
#include "tests/support/channels_last_ops.h"
#include "tests/support/channels_last_run.h"
#include "tests/support/random_tensor.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("cuda channels-last copies: layouts, slices and bf16 hold the CPU's values") {
  Rng rng(81);
  const Tensor values = random_tensor(rng, {3, 6, 5, 7}), part = random_tensor(rng, {3, 2, 5, 7});
  Tensor last = poisoned(values.shape(), Layout::channels_last, Device::cuda(0));
  last.copy_from(values);  // host NCHW -> GPU channels last
  CHECK(last.layout() == Layout::channels_last);
  CHECK(last.to_vector<float>() == values.to_vector<float>());
  Tensor again = poisoned(values.shape(), Layout::nchw, Device::cuda(0));
  again.copy_from(last);  // on the GPU: channels last -> NCHW
  CHECK(again.to_vector<float>() == values.to_vector<float>());
  // A channel slice written on the GPU; its neighbours keep their values.
  last.channels(3, 5).copy_from(part.to(Device::cuda(0)));
  CHECK(last.channels(3, 5).to_vector<float>() == part.to_vector<float>());
  CHECK(last.channels(0, 3).to_vector<float>() == values.channels(0, 3).to_vector<float>());
  CHECK(last.channels(5, 6).to_vector<float>() == values.channels(5, 6).to_vector<float>());
  // bf16 in the same layout, converted on the GPU (through NCHW copies), as the CPU rounds.
  const Tensor narrow = again.converted(DType::bf16);
  Tensor narrow_last =
      Tensor::empty(values.shape(), Device::cuda(0), DType::bf16, Layout::channels_last);
  narrow_last.convert_from(again);
  CHECK(narrow_last.to_doubles() == values.converted(DType::bf16).to_doubles());
  CHECK(narrow.to_doubles() == values.converted(DType::bf16).to_doubles());
}

// Tolerances: each set is one or two ops deep. Float: cuDNN's FMA convolutions and the GPU's
// reduction trees differ from the CPU's in the order of float sums, a few ulps (norm-wise about
// 1e-7 here). bf16: a value rounded from a slightly different float sum may land one bf16 step
// (2^-8 relative) apart, so norm-wise a few 1e-3 at most.
TEST_CASE("cuda channels-last ops: the native kernels give the CPU's NCHW values, float and bf16") {
  const OpInputs in(72);
  for (const OpSet& set : channels_last_op_sets(in))
    for (DType dtype : {DType::f32, DType::bf16}) {
      INFO(set.name << ", " << dtype_name(dtype));
      const std::vector<Tensor> cpu = set.run(Layout::nchw, dtype, Device::cpu()),
                                gpu = set.run(Layout::channels_last, dtype, Device::cuda(0));
      CHECK(nan_count(gpu) == 0);
      const double worst = worst_relative_difference(cpu, gpu);
      MESSAGE(set.name << ", " << dtype_name(dtype) << ": largest relative difference " << worst);
      CHECK(worst < (dtype == DType::f32 ? 1e-5 : 1e-2));
    }
}

TEST_CASE("cuda channels-last step: every op of the tiny model's training takes channels last") {
  for (bool amp : {false, true}) {
    INFO("amp " << amp);
    const uint64_t before = detail::nchw_copies_made.load(),
                   packed = detail::packed_copies_made.load();
    const TinyRun run = run_tiny(Layout::channels_last, amp, Device::cuda(0));
    CHECK(detail::nchw_copies_made.load() == before);  // no op ran on NCHW copies of its views
    // The convolutions that read or write a Concat's channel slice (layers 4 and 6 feed both a
    // convolution and a Concat) take packed copies of it.
    MESSAGE("packed channels-last copies for cuDNN: " << detail::packed_copies_made.load() -
                                                             packed);
    CHECK(run.gradients.size() > 20);
  }
}

TEST_CASE("cuda channels-last weights: round_weights_to_bf16 writes the CPU's bits") {
  Rng rng(93);
  const Tensor values = random_tensor(rng, {1, 8000, 1, 1});
  // (offset, out channels, in channels, kernel area): a gap before, between and after them.
  const std::vector<int64_t> segments = {17, 8, 6, 9, 600, 16, 32, 9, 6000, 4, 3, 36};
  const Tensor table = Tensor::from_vector(segments, {1, 1, 1, int64_t(segments.size())});
  Tensor cpu = Tensor::zeros(values.shape(), Device::cpu(), DType::bf16);
  ops::round_weights_to_bf16(values.view<float>(), cpu.view<bf16>(), table.view<int64_t>());
  const Tensor gpu_values = values.to(Device::cuda(0)), gpu_table = table.to(Device::cuda(0));
  Tensor gpu = poisoned(values.shape(), Layout::nchw).converted(DType::bf16).to(Device::cuda(0));
  ops::round_weights_to_bf16(gpu_values.view<float>(), gpu.view<bf16>(), gpu_table.view<int64_t>());
  CHECK(gpu.to_doubles() == cpu.to_doubles());
}

// The Solver's note after a channels-last first step that copied views for some op: none on
// cuDNN's path (every op takes the layout), one on the gemm path (its convolutions read NCHW).
TEST_CASE("cuda channels-last Solver: a first step says whether it copied views for an op") {
  const std::vector<TrackingBatch> data = tracking_batches();
  for (cuda::ConvPath path : {cuda::ConvPath::cudnn, cuda::ConvPath::gemm}) {
    INFO("gemm path " << (path == cuda::ConvPath::gemm));
    cuda::set_conv_path(path);
    models::DetectionModel model = tracking_model(Device::cuda(0));
    models::Solver solver(model, tracking_solver_options(data, true));
    solver.step(data[0].images.to(Device::cuda(0)), data[0].labels, 0);
    bool copied = false;
    for (const std::string& note : solver.take_notes())
      copied =
          copied || note.find("views for ops without a channels-last kernel") != std::string::npos;
    CHECK(copied == (path == cuda::ConvPath::gemm));
  }
  cuda::set_conv_path(cuda::ConvPath::cudnn);
}
