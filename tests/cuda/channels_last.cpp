// tests/cuda/channels_last.cpp — channels last on the GPU (kernels/view.h, --channels-last):
// copy_elements's kernel changes layouts and fills channel slices with the CPU's values, and the
// tiny model's head, gradients and SGD steps in channels last are its NCHW bits on the GPU, float
// and --amp (an op whose CUDA kernel reads NCHW runs on NCHW copies of its views, made on the
// GPU: kernels/nchw_adapter.h).
#include <vector>

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

TEST_CASE("cuda channels-last network: the tiny model's steps are its NCHW bits on the GPU") {
  for (bool amp : {false, true}) {
    INFO("amp " << amp);
    check_same_run(run_tiny(Layout::nchw, amp, Device::cuda(0)),
                   run_tiny(Layout::channels_last, amp, Device::cuda(0)));
  }
}
