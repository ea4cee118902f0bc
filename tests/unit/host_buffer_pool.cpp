// tests/unit/host_buffer_pool.cpp — the pinned-buffer pool's rule (data/host_buffer_pool.h),
// with a fake fence standing for a device copy's event: a buffer whose last device read has
// not completed is handed out only after the host waited for it; a buffer already free is
// preferred to waiting; a full pool hands the buffer and its fence back to the caller. And
// the host half of Batch::images_tensor.
#include <memory>

#include "data/batch.h"
#include "data/host_buffer_pool.h"
#include "tests/support/testing.h"

using namespace bareyolo;

namespace {

// A device copy that finishes when the host waits for it (or when the test says so).
struct FakeCopy {
  bool done = false;
  int waits = 0;  // synchronize() calls that found it still running
};

struct FakeFence {
  std::shared_ptr<FakeCopy> copy;  // null once moved from
  bool complete() const { return copy->done; }
  void synchronize() const {
    if (!copy->done) ++copy->waits;
    copy->done = true;
  }
};

FakeFence running(std::shared_ptr<FakeCopy>& copy) {
  copy = std::make_shared<FakeCopy>();
  return {copy};
}

}  // namespace

TEST_CASE("host buffer pool: a buffer still read by a copy is handed out only after it") {
  data::HostBufferPool<FakeFence> pool(4);
  int a = 0;
  std::shared_ptr<FakeCopy> copy;
  REQUIRE(pool.keep(&a, 64, running(copy)));
  CHECK(pool.take(128) == nullptr);  // another size
  CHECK_FALSE(copy->done);
  CHECK(pool.take(64) == &a);
  CHECK(copy->done);
  CHECK(copy->waits == 1);
  CHECK(pool.take(64) == nullptr);  // handed out once
}

TEST_CASE("host buffer pool: a free buffer is preferred to waiting for a running copy") {
  data::HostBufferPool<FakeFence> pool(4);
  int older = 0, newer = 0;
  std::shared_ptr<FakeCopy> older_copy, newer_copy;
  REQUIRE(pool.keep(&older, 64, running(older_copy)));
  REQUIRE(pool.keep(&newer, 64, running(newer_copy)));
  newer_copy->done = true;  // the later copy finished first
  CHECK(pool.take(64) == &newer);
  CHECK(older_copy->waits == 0);
  CHECK(pool.take(64) == &older);
  CHECK(older_copy->waits == 1);

  // Both running: the oldest is waited for.
  REQUIRE(pool.keep(&older, 64, running(older_copy)));
  REQUIRE(pool.keep(&newer, 64, running(newer_copy)));
  CHECK(pool.take(64) == &older);
  CHECK(older_copy->waits == 1);
  CHECK(newer_copy->waits == 0);
}

TEST_CASE("host buffer pool: a full pool leaves the buffer and its fence to the caller") {
  data::HostBufferPool<FakeFence> pool(1);
  int a = 0, b = 0;
  std::shared_ptr<FakeCopy> copy_a, copy_b;
  REQUIRE(pool.keep(&a, 64, running(copy_a)));
  FakeFence fence_b = running(copy_b);
  CHECK_FALSE(pool.keep(&b, 64, std::move(fence_b)));
  CHECK(fence_b.copy == copy_b);  // not moved from: the caller still waits on it
  CHECK(pool.size() == 1);
  CHECK(pool.take(64) == &a);
  CHECK(pool.size() == 0);
}

// The GPU case is tests/cuda/batch_upload.cpp.
TEST_CASE("Batch::images_tensor on the host: a copy of the buffer, no device read recorded") {
  data::Batch batch;
  batch.size = 2, batch.height = 4, batch.width = 8;
  batch.images = data::allocate_host_buffer(2 * batch.image_floats());
  for (size_t i = 0; i < 2 * batch.image_floats(); ++i) batch.images[i] = float(i) * 0.5f;
  const Tensor images = batch.images_tensor(Device::cpu());
  CHECK(images.shape() == Shape4{2, 3, 4, 8});
  CHECK(images.to_vector<float>() ==
        std::vector<float>(batch.images.get(), batch.images.get() + 2 * batch.image_floats()));
  CHECK(batch.images.get_deleter().last_read.complete());
  CHECK_FALSE(batch.images.get_deleter().last_read.recorded());
}
