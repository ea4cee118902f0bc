// tests/cuda/host_buffer.cpp — with a GPU, batch buffers are pinned (page-locked) memory and
// freed ones are reused for the next batch of the same size.
#include "data/host_buffer.h"
#include "kernels/cuda/runtime/runtime.h"
#include "tests/support/testing.h"

TEST_CASE("cuda batch host buffers are pinned and pooled") {
  using namespace bareyolo;
  uint8_t* first_address = nullptr;
  {
    data::HostBuffer buffer = data::allocate_host_buffer(3 * 320 * 320 * 8);  // 8 images' bytes
    CHECK(cuda::is_pinned(buffer.get()));
    buffer[0] = 1;  // host-writable
    first_address = buffer.get();
  }
  data::HostBuffer again = data::allocate_host_buffer(3 * 320 * 320 * 8);
  CHECK(again.get() == first_address);  // the freed buffer came back from the pool
  CHECK(cuda::is_pinned(again.get()));
}
