// tests/unit/host_staging.cpp — a collective on host buffers through host staging
// (engine/distributed/comm/host_staging.h) is queued on the device and never waited for by the
// host when issued: its Work says it has not completed while the copy back is still on its way
// (here: device memory that runs behind the host, tests/support/device_only_communicator.h), the
// caller's buffer holds the result once wait() returns, and wait() is where the host waits, only
// if the bytes have not arrived.
#include <doctest/doctest.h>

#include <vector>

#include "engine/distributed/comm/host_staging.h"
#include "tests/support/device_only_communicator.h"

using namespace bareyolo;
using namespace bareyolo::dist;
using namespace bareyolo::dist::testing;

namespace {

struct StagedJob {
  HostMemoryAsDevice* memory = nullptr;
  std::unique_ptr<Communicator> comm;
  StagedJob() {
    auto lagging = std::make_unique<HostMemoryAsDevice>();
    lagging->lag();
    memory = lagging.get();
    comm = with_host_staging(std::make_unique<DeviceOnly>(make_single_rank_communicator()),
                             std::move(lagging));
  }
};

}  // namespace

TEST_CASE("host staging: a host collective's result arrives in wait(), never at the issue") {
  StagedJob job;
  std::vector<int64_t> send = {7, -3}, received = {-1, -1};  // poisoned
  WorkHandle work = job.comm->allgather(CommBuffer::of(send.data(), 2),
                                        CommBuffer::of(received.data(), 2), "gather");
  CHECK_FALSE(work->completed());                   // the device has not run the copy back
  CHECK(received == std::vector<int64_t>{-1, -1});  // nothing landed yet
  CHECK(job.memory->host_waits == 0);
  job.memory->run_device_through(job.memory->downloads);
  CHECK(work->completed());
  work->wait();
  CHECK(received == std::vector<int64_t>{7, -3});
  CHECK(job.memory->host_waits == 0);  // it had arrived: wait() did not wait
}

TEST_CASE("host staging: wait() on a result still on its way is the host waiting") {
  StagedJob job;
  std::vector<double> values = {1.5, 2.5};
  WorkHandle work =
      job.comm->allreduce(CommBuffer::of(values.data(), 2), ReduceOp::sum, "loss items");
  CHECK_FALSE(work->completed());
  work->wait();
  CHECK(job.memory->host_waits == 1);
  CHECK(values == std::vector<double>{1.5, 2.5});  // one rank: its own values back
  // Device buffers pass straight through: nothing staged, nothing to wait for.
  std::vector<float> on_device = {4.0f};
  WorkHandle direct =
      job.comm->allreduce(CommBuffer::of(on_device.data(), 1, kFakeGpu), ReduceOp::sum, "bucket 0");
  CHECK(direct->completed());
  CHECK(job.memory->downloads == 1);
}
