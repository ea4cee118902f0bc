// tests/cuda/batch_upload.cpp — a batch's way to the GPU and the runtime's events:
// Batch::images_tensor(cuda) copies straight from the pinned buffer on the compute stream,
// bit for bit; the buffer goes back to the pool with the copy's event and is handed to the
// next batch only once the copy is done (here the copy is queued behind ~1 ms of other work,
// and the next batch overwrites the buffer at once); Event::synchronize makes the host wait
// for the marked work.
#include <algorithm>

#include "data/batch.h"
#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/runtime.h"
#include "tests/support/testing.h"

using namespace bareyolo;

namespace {

data::Batch random_batch(testing::Rng& rng, int size, int height, int width) {
  data::Batch batch;
  batch.size = size, batch.height = height, batch.width = width;
  const size_t floats = size_t(size) * batch.image_floats();
  batch.images = data::allocate_host_buffer(floats);
  const std::vector<float> values = testing::random_vector<float>(rng, int64_t(floats), 0, 1);
  std::copy(values.begin(), values.end(), batch.images.get());
  return batch;
}

// Keeps the compute stream busy (12 passes over 512 MB, about 1-2 ms on an H200), so that
// work queued next is still pending when the host moves on.
void queue_slow_work(const cuda::DeviceBuffer& scratch) {
  for (int pass = 0; pass < 12; ++pass) cuda::fill_bytes(scratch.get(), pass, scratch.bytes(), 0);
}

}  // namespace

TEST_CASE("cuda batch upload: the pinned buffer's bytes on the device, the copy's event kept") {
  testing::Rng rng(31);
  data::Batch batch = random_batch(rng, 3, 40, 56);
  REQUIRE(cuda::is_pinned(batch.images.get()));
  const Tensor images = batch.images_tensor(Device::cuda(0));
  CHECK(images.device() == Device::cuda(0));
  CHECK(images.shape() == Shape4{3, 3, 40, 56});
  const cuda::Event& copy = batch.images.get_deleter().last_read;
  CHECK(copy.recorded());
  copy.synchronize();
  CHECK(copy.complete());
  CHECK(images.to_vector<float>() ==
        std::vector<float>(batch.images.get(), batch.images.get() + 3 * batch.image_floats()));
  CHECK(images.to_vector<float>() == batch.images_tensor(Device::cpu()).to_vector<float>());
}

TEST_CASE("cuda batch upload: the next batch gets the buffer only after the copy from it") {
  testing::Rng rng(32);
  const cuda::DeviceBuffer scratch(size_t(512) << 20, 0);
  // An odd size, so that no buffer left in the pool by other tests matches.
  const int size = 5, height = 232, width = 296;
  data::Batch batch = random_batch(rng, size, height, width);
  const size_t floats = size_t(size) * batch.image_floats();
  const std::vector<float> expected(batch.images.get(), batch.images.get() + floats);
  const float* address = batch.images.get();

  queue_slow_work(scratch);
  const Tensor images = batch.images_tensor(Device::cuda(0));
  MESSAGE("copy still pending when the batch was dropped: "
          << !batch.images.get_deleter().last_read.complete());
  batch = data::Batch{};  // the buffer returns to the pool, its copy (likely) still queued
  data::HostBuffer next = data::allocate_host_buffer(floats);
  REQUIRE(next.get() == address);                     // the same buffer, reused
  std::fill(next.get(), next.get() + floats, -1.0f);  // the next batch's loader writes it
  CHECK(images.to_vector<float>() == expected);
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
