// tests/unit/host_buffer_pool.cpp — the pinned-buffer pool's rule (data/host_buffer_pool.h),
// with a fake fence standing for a device copy's event: a buffer whose last device read has
// not completed is handed out only after the host waited for it; a buffer already free is
// preferred to waiting; the smallest buffer that fits serves a request; the oldest buffers
// leave a full pool with their fences, for the caller to wait on. (Batch::images_tensor's
// host half is tests/unit/batch.cpp, its GPU half tests/cuda/batch_upload.cpp.)
#include <memory>

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

using Pool = data::HostBufferPool<FakeFence>;
constexpr size_t kLots = size_t{1} << 40;  // a byte bound that never binds

// Keeps `buffer` and expects the pool to let nothing go.
void keep_all(Pool& pool, void* buffer, size_t bytes, FakeFence fence) {
  REQUIRE(pool.keep({buffer, bytes, std::move(fence)}).empty());
}

}  // namespace

TEST_CASE("host buffer pool: a buffer still read by a copy is handed out only after it") {
  Pool pool(4, kLots);
  int a = 0;
  std::shared_ptr<FakeCopy> copy;
  keep_all(pool, &a, 64, running(copy));
  CHECK(pool.take(128).data == nullptr);  // too small for that
  CHECK_FALSE(copy->done);
  CHECK(pool.take(64).data == &a);
  CHECK(copy->done);
  CHECK(copy->waits == 1);
  CHECK(pool.take(64).data == nullptr);  // handed out once
}

TEST_CASE("host buffer pool: a free buffer is preferred to waiting for a running copy") {
  Pool pool(4, kLots);
  int older = 0, newer = 0;
  std::shared_ptr<FakeCopy> older_copy, newer_copy;
  keep_all(pool, &older, 64, running(older_copy));
  keep_all(pool, &newer, 64, running(newer_copy));
  newer_copy->done = true;  // the later copy finished first
  CHECK(pool.take(64).data == &newer);
  CHECK(older_copy->waits == 0);
  CHECK(pool.take(64).data == &older);
  CHECK(older_copy->waits == 1);

  // Both running: the oldest is waited for.
  keep_all(pool, &older, 64, running(older_copy));
  keep_all(pool, &newer, 64, running(newer_copy));
  CHECK(pool.take(64).data == &older);
  CHECK(older_copy->waits == 1);
  CHECK(newer_copy->waits == 0);
}

TEST_CASE("host buffer pool: a request takes the smallest buffer that fits, and its real size") {
  Pool pool(4, kLots);
  int large = 0, medium = 0, small = 0;
  std::shared_ptr<FakeCopy> copies[3];
  keep_all(pool, &large, 4096, running(copies[0]));
  keep_all(pool, &medium, 1024, running(copies[1]));
  keep_all(pool, &small, 256, running(copies[2]));
  for (auto& copy : copies) copy->done = true;
  // A training batch after validation's larger ones: served from them, not pinned anew.
  const Pool::Taken taken = pool.take(512);
  CHECK(taken.data == &medium);
  CHECK(taken.bytes == 1024);  // the deleter keeps it under its own size
  CHECK(pool.take(2048).data == &large);
  CHECK(pool.take(512).data == nullptr);  // the 256-byte buffer does not fit
  CHECK(pool.size() == 1);
}

TEST_CASE("host buffer pool: a larger free buffer is preferred to waiting for a smaller one") {
  Pool pool(4, kLots);
  int small = 0, large = 0;
  std::shared_ptr<FakeCopy> small_copy, large_copy;
  keep_all(pool, &small, 256, running(small_copy));
  keep_all(pool, &large, 4096, running(large_copy));
  large_copy->done = true;
  CHECK(pool.take(256).data == &large);
  CHECK(small_copy->waits == 0);
}

TEST_CASE("host buffer pool: beyond its bounds the oldest buffers go back to the caller") {
  int a = 0, b = 0, c = 0;
  std::shared_ptr<FakeCopy> copy_a, copy_b, copy_c;
  SUBCASE("by count") {
    Pool pool(2, kLots);
    keep_all(pool, &a, 64, running(copy_a));
    keep_all(pool, &b, 64, running(copy_b));
    std::vector<Pool::Buffer> evicted = pool.keep({&c, 64, running(copy_c)});
    REQUIRE(evicted.size() == 1);
    CHECK(evicted[0].data == &a);  // the oldest
    CHECK(evicted[0].bytes == 64);
    CHECK(evicted[0].last_read.copy == copy_a);  // its fence: the caller waits before freeing
    CHECK(pool.size() == 2);
    CHECK(pool.take(64).data == &b);
  }
  SUBCASE("by bytes") {
    Pool pool(16, 1000);
    keep_all(pool, &a, 400, running(copy_a));
    keep_all(pool, &b, 400, running(copy_b));
    std::vector<Pool::Buffer> evicted = pool.keep({&c, 900, running(copy_c)});
    REQUIRE(evicted.size() == 2);
    CHECK(evicted[0].data == &a);
    CHECK(evicted[1].data == &b);
    CHECK(pool.size() == 1);
    CHECK(pool.take(900).data == &c);
  }
  SUBCASE("a buffer larger than the byte bound is not kept") {
    Pool pool(16, 1000);
    std::vector<Pool::Buffer> evicted = pool.keep({&a, 2000, running(copy_a)});
    REQUIRE(evicted.size() == 1);
    CHECK(evicted[0].data == &a);
    CHECK(pool.size() == 0);
  }
}
