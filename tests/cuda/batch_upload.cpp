// tests/cuda/batch_upload.cpp — a batch's way to the GPU and the runtime's events:
// Batch::images_tensor(cuda) copies the bytes straight from the pinned buffer on the compute
// stream and converts them there, to the CPU's floats bit for bit, and a --multi-scale batch is
// resized there as on the CPU (to a rounding: the compilers fuse the resize's multiply-adds
// differently); the input-image kernels against the CPU ops on random bytes and values, their
// outputs poisoned first; the buffer goes back to the pool with the copy's event and is handed
// to the next batch only once the copy is done (here the copy is queued behind ~1 ms of other
// work, and the next batch overwrites the buffer at once); Event::synchronize makes the host
// wait for the marked work; the trainer's ImageUploader copies beside the compute stream into
// its two buffers, each input still the CPU's though every copy is queued behind pending work.
#include <algorithm>
#include <limits>

#include "data/batch.h"
#include "data/image_upload.h"
#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/ops.h"
#include "tests/support/random_images.h"
#include "tests/support/random_tensor.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// How far the GPU's resize may be from the CPU's: values in [0, 1], a few roundings apart.
constexpr double kResizeTolerance = 1e-6;

data::Batch random_batch(Rng& rng, int size, int height, int width, int input_height = 0,
                         int input_width = 0) {
  std::vector<data::Sample> samples = random_samples(rng, size, width, height);
  data::Step step;
  step.width = width, step.height = height;
  step.input_width = input_width, step.input_height = input_height;
  return data::collate(step, samples);
}

// Every element NaN, on `device`: an element a kernel fails to write fails the comparison.
Tensor poisoned(Shape4 shape, Device device) {
  return Tensor::from_vector(
      std::vector<float>(size_t(shape.numel()), std::numeric_limits<float>::quiet_NaN()), shape,
      device);
}

// Keeps the compute stream busy (12 passes over 512 MB, about 1-2 ms on an H200), so that
// work queued next is still pending when the host moves on.
void queue_slow_work(const cuda::DeviceBuffer& scratch) {
  for (int pass = 0; pass < 12; ++pass) cuda::fill_bytes(scratch.get(), pass, scratch.bytes(), 0);
}

}  // namespace

TEST_CASE("cuda batch upload: the pinned buffer's bytes as floats on the device, event kept") {
  Rng rng(31);
  const data::Batch batch = random_batch(rng, 3, 40, 56);
  REQUIRE(cuda::is_pinned(batch.images.get()));
  const Tensor images = batch.images_tensor(Device::cuda(0));
  CHECK(images.device() == Device::cuda(0));
  CHECK(images.shape() == Shape4{3, 3, 40, 56});
  const cuda::Event& copy = batch.images.get_deleter().last_read;
  CHECK(copy.recorded());
  copy.synchronize();
  CHECK(copy.complete());
  CHECK(images.to_vector<float>() == unit_floats_nchw(batch.images.get(), 3, 40, 56));
  CHECK(images.to_vector<float>() == batch.images_tensor(Device::cpu()).to_vector<float>());
}

TEST_CASE("cuda batch upload: a --multi-scale batch is resized on the device as on the CPU") {
  Rng rng(33);
  // (height, width) from 36 x 44: up, down, and down one side while up the other.
  const int inputs[][2] = {{64, 48}, {29, 17}, {30, 60}};
  for (const auto& input : inputs) {
    CAPTURE(input[0]);
    CAPTURE(input[1]);
    const data::Batch batch = random_batch(rng, 2, 36, 44, input[0], input[1]);
    const Tensor images = batch.images_tensor(Device::cuda(0));
    REQUIRE(images.shape() == Shape4{2, 3, input[0], input[1]});
    check_close(images.to_vector<float>(), batch.images_tensor(Device::cpu()).to_vector<float>(), 0,
                kResizeTolerance, "resized batch");
  }
}

TEST_CASE("cuda input-image kernels: the CPU ops' values from random data, outputs poisoned") {
  Rng rng(34);
  const Device gpu = Device::cuda(0);
  SUBCASE("hwc_bytes_to_unit_float, bit for bit") {
    const Shape4 shape{3, 3, 37, 45};
    const Tensor bytes = Tensor::from_vector(random_bytes(rng, size_t(shape.numel())),
                                             {shape.n, shape.h, shape.w, shape.c});
    Tensor on_gpu = poisoned(shape, gpu), on_cpu = poisoned(shape, Device::cpu());
    ops::hwc_bytes_to_unit_float(bytes.to(gpu).view<uint8_t>(), on_gpu.view<float>());
    ops::hwc_bytes_to_unit_float(bytes.view<uint8_t>(), on_cpu.view<float>());
    CHECK(on_gpu.to_vector<float>() == on_cpu.to_vector<float>());
  }
  SUBCASE("resize_bilinear, from a strided input (channels 1..3 of 5), up, down and across") {
    const Tensor parent = random_tensor(rng, {2, 5, 37, 45}, 0, 1);
    const Tensor x_cpu = parent.channels(1, 4), x_gpu = parent.to(gpu).channels(1, 4);
    const Shape4 outputs[] = {{2, 3, 70, 90}, {2, 3, 19, 23}, {2, 3, 60, 30}, {2, 3, 37, 45}};
    for (const Shape4& shape : outputs) {
      CAPTURE(shape.str());
      Tensor on_gpu = poisoned(shape, gpu), on_cpu = poisoned(shape, Device::cpu());
      ops::resize_bilinear(x_gpu.view<float>(), on_gpu.view<float>());
      ops::resize_bilinear(x_cpu.view<float>(), on_cpu.view<float>());
      check_close(on_gpu.to_vector<float>(), on_cpu.to_vector<float>(), 0, kResizeTolerance,
                  "resize_bilinear");
    }
  }
}

TEST_CASE("cuda batch upload: the next batch gets the buffer only after the copy from it") {
  Rng rng(32);
  const cuda::DeviceBuffer scratch(size_t(512) << 20, 0);
  // The largest batch of these tests, so that no other buffer left in the pool fits the next
  // request (a free one that fits would be preferred to this one, still being read).
  const int size = 5, height = 232, width = 296;
  data::Batch batch = random_batch(rng, size, height, width);
  const size_t bytes = size_t(size) * batch.image_bytes();
  const std::vector<float> expected = unit_floats_nchw(batch.images.get(), size, height, width);
  const uint8_t* address = batch.images.get();

  queue_slow_work(scratch);
  const Tensor images = batch.images_tensor(Device::cuda(0));
  MESSAGE("copy still pending when the batch was dropped: "
          << !batch.images.get_deleter().last_read.complete());
  batch = data::Batch{};  // the buffer returns to the pool, its copy (likely) still queued
  data::HostBuffer next = data::allocate_host_buffer(bytes);
  REQUIRE(next.get() == address);                // the same buffer, reused
  std::fill(next.get(), next.get() + bytes, 0);  // the next batch's loader writes it
  CHECK(images.to_vector<float>() == expected);
}

TEST_CASE("cuda image uploader: copies beside the compute stream, each input the CPU's") {
  Rng rng(35);
  const cuda::DeviceBuffer scratch(size_t(512) << 20, 0);
  data::ImageUploader uploader(Device::cuda(0));
  // Three batches through two buffers: the third overwrites the first's buffer. The compute
  // stream is kept busy before each upload, so each copy is queued while the conversion of the
  // batch before is still pending: a copy that did not wait for the last read of its buffer
  // would change the first input, one the compute stream did not wait for would convert bytes
  // not yet copied.
  const int shapes[][3] = {{3, 96, 64}, {2, 64, 80}, {3, 96, 64}};
  std::vector<data::Batch> batches;
  std::vector<Tensor> inputs;
  for (const auto& shape : shapes) {
    batches.push_back(random_batch(rng, shape[0], shape[1], shape[2]));
    queue_slow_work(scratch);
    inputs.push_back(uploader.images_tensor(batches.back()));
    CHECK(batches.back().images.get_deleter().last_read.recorded());
  }
  for (size_t b = 0; b < batches.size(); ++b) {
    CAPTURE(b);
    CHECK(inputs[b].device() == Device::cuda(0));
    CHECK(inputs[b].to_vector<float>() ==
          batches[b].images_tensor(Device::cpu()).to_vector<float>());
  }
}

TEST_CASE("cuda events: synchronize waits for the marked work") {
  CHECK(cuda::Event().complete());  // marks nothing
  const cuda::DeviceBuffer scratch(size_t(512) << 20, 0);
  const size_t bytes = size_t(64) << 20;
  float* host = static_cast<float*>(cuda::malloc_pinned(bytes));
  std::fill(host, host + bytes / 4, 1.0f);

  queue_slow_work(scratch);
  cuda::fill_bytes(scratch.get(), 0, bytes, 0);  // 0.0f
  cuda::copy_async(host, scratch.get(), bytes, cuda::CopyKind::device_to_host, 0);
  cuda::Event copied = cuda::Event::record(0);
  CHECK(copied.recorded());
  copied.synchronize();
  CHECK(copied.complete());
  CHECK(std::all_of(host, host + bytes / 4, [](float v) { return v == 0.0f; }));

  // Moved: the event goes with it; the moved-from one is empty, hence complete.
  cuda::Event moved = std::move(copied);
  CHECK(moved.recorded());
  CHECK_FALSE(copied.recorded());
  cuda::free_pinned(host);
}
