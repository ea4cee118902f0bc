// engine/distributed/comm/communicator.cpp — what every backend shares: CommBuffer over a tensor,
// the names of the reductions, and the communicator of a one-rank job (contract: communicator.h).
#include "engine/distributed/comm/communicator.h"

#include <stdexcept>

#include "kernels/device_memory.h"

namespace bareyolo::dist {
namespace {

// A collective that has nothing to wait for.
class CompletedWork final : public Work {
 public:
  void wait() override {}
  bool completed() override { return true; }
};

// world_size 1: the rank's buffer already holds the sum, the mean, the max and the root's
// data; only allgather moves bytes (send into recv), unless they are the same memory.
class SingleRankCommunicator final : public Communicator {
 public:
  explicit SingleRankCommunicator(Backend backend) : backend_(backend) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  Backend backend() const override { return backend_; }

  WorkHandle allreduce(CommBuffer, ReduceOp, std::string_view) override { return done(); }
  WorkHandle broadcast(CommBuffer, int root, std::string_view) override {
    if (root != 0) {
      throw std::invalid_argument("broadcast root " + std::to_string(root) +
                                  " is not a rank of this one-rank job (the only rank is 0)");
    }
    return done();
  }
  WorkHandle allgather(CommBuffer send, CommBuffer recv, std::string_view) override {
    if (recv.count != send.count || recv.dtype != send.dtype) {
      throw std::invalid_argument("allgather: the receive buffer must hold world_size (1) x " +
                                  std::to_string(send.count) + " elements of the send dtype, not " +
                                  std::to_string(recv.count));
    }
    if (send.data != recv.data && send.bytes() > 0)
      copy_bytes(recv.data, recv.device, send.data, send.device, size_t(send.bytes()));
    return done();
  }
  WorkHandle barrier(std::string_view) override { return done(); }

 private:
  static WorkHandle done() { return completed_work(); }

  Backend backend_;
};

}  // namespace

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::max:
      return "max";
  }
  return "?";
}

CommBuffer CommBuffer::of(Tensor& tensor) {
  if (!tensor.defined()) throw std::invalid_argument("CommBuffer::of: the tensor is undefined");
  if (!tensor.dense()) {
    throw std::invalid_argument("CommBuffer::of: tensor " + tensor.shape().str() +
                                " is a strided view; a collective needs contiguous memory");
  }
  char* first = static_cast<char*>(tensor.storage()->data()) +
                tensor.offset() * int64_t(dtype_size(tensor.dtype()));
  return {first, tensor.numel(), tensor.dtype(), tensor.device()};
}

WorkHandle completed_work() { return std::make_shared<CompletedWork>(); }

std::unique_ptr<Communicator> make_single_rank_communicator(Backend backend) {
  return std::make_unique<SingleRankCommunicator>(backend);
}

}  // namespace bareyolo::dist
