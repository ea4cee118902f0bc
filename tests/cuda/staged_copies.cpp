// tests/cuda/staged_copies.cpp — kernels/staged_copies.h's downloads on a GPU: made behind
// pending work, a download does not make the host wait, says it has not arrived while that work
// runs, and reads back the bytes the device held once the work before it had run (not what the
// host wrote later); two downloads in flight keep their own staging buffers, and a finished
// one's buffer serves the next.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/staged_copies.h"
#include "tests/support/random_tensor.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

const Device kGpu = Device::cuda(0);

// ~1 ms or more of fills queued on the compute stream: work a later copy waits behind.
void queue_slow_work(const cuda::DeviceBuffer& scratch) {
  for (int pass = 0; pass < 12; ++pass) cuda::fill_bytes(scratch.get(), pass, scratch.bytes(), 0);
}

std::vector<int64_t> random_words(Rng& rng, size_t count) {
  std::vector<int64_t> words(count);
  for (int64_t& word : words) word = int64_t(rng());
  return words;
}

}  // namespace

TEST_CASE("cuda staged download: queued behind the device's work, read without a wait once there") {
  Rng rng(7);
  const cuda::DeviceBuffer slow(size_t(512) << 20, 0);
  const size_t count = 1000, bytes = count * sizeof(int64_t);
  const std::vector<int64_t> first = random_words(rng, count), second = random_words(rng, count);
  const cuda::DeviceBuffer values(bytes, 0);
  cuda::copy(values.get(), first.data(), bytes, cuda::CopyKind::host_to_device, 0);

  queue_slow_work(slow);
  const uint64_t waits_before = cuda::host_waits();
  StagedDownload early(values.get(), kGpu, bytes);  // sees `first`
  const bool arrived_at_once = early.arrived();
  // Written after the download was queued: a second download sees it, the first does not.
  upload_without_waiting(values.get(), kGpu, second.data(), bytes);
  StagedDownload late(values.get(), kGpu, bytes);
  CHECK(cuda::host_waits() == waits_before);
  MESSAGE("the download had arrived at once: " << arrived_at_once);

  std::vector<int64_t> read_early(count, -1), read_late(count, -1);  // poisoned
  late.read(read_late.data());  // waits: the slow work is likely still running
  CHECK(late.arrived());
  CHECK(early.arrived());  // queued before `late`
  const uint64_t waits_after_late = cuda::host_waits();
  early.read(read_early.data());
  CHECK(cuda::host_waits() == waits_after_late);  // arrived: no wait
  CHECK(read_early == first);
  CHECK(read_late == second);
}

TEST_CASE("cuda staged download: a finished download's staging buffer serves the next one") {
  Rng rng(8);
  const size_t count = 64, bytes = count * sizeof(int64_t);
  const cuda::DeviceBuffer values(bytes, 0);
  for (int round = 0; round < 4; ++round) {
    const std::vector<int64_t> words = random_words(rng, count);
    upload_without_waiting(values.get(), kGpu, words.data(), bytes);
    StagedDownload download(values.get(), kGpu, bytes);
    std::vector<int64_t> read(count, -1);
    download.read(read.data());
    CHECK(read == words);
  }
}
