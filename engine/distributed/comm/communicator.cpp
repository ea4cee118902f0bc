// engine/distributed/comm/communicator.cpp — what every backend shares: CommBuffer over a tensor,
// the names of the reductions, and the communicator of a one-rank job (contract: communicator.h).
#include "engine/distributed/comm/communicator.h"

#include <stdexcept>

#include "kernels/device_memory.h"
#include "kernels/devices.h"

namespace bareyolo::dist {
namespace {

// A collective that has nothing to wait for: it succeeded, or failed with `error`.
class CompletedWork final : public Work {
 public:
  explicit CompletedWork(std::string error) : error_(std::move(error)) {}
  void wait() override {
    if (!error_.empty()) throw std::runtime_error(error_);
  }
  bool completed() override { return true; }
  std::optional<std::chrono::steady_clock::time_point> finished_at() const override {
    return finished_at_;
  }

 private:
  std::string error_;
  std::chrono::steady_clock::time_point finished_at_ = std::chrono::steady_clock::now();
};

// world_size 1: the rank's buffer already holds the sum, the mean, the max and the root's
// data; only allgather moves bytes (send into recv), unless they are the same memory.
class SingleRankCommunicator final : public Communicator {
 public:
  explicit SingleRankCommunicator(Backend backend) : backend_(backend) {}

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  Backend backend() const override { return backend_; }

  WorkHandle allreduce(CommBuffer buffer, ReduceOp op, std::string_view) override {
    check_buffer(buffer, "allreduce", kName);
    check_reduction(buffer, op);
    return done();
  }
  WorkHandle broadcast(CommBuffer buffer, int root, std::string_view) override {
    check_buffer(buffer, "broadcast", kName);
    check_broadcast_root(root, 1);
    return done();
  }
  WorkHandle allgather(CommBuffer send, CommBuffer recv, std::string_view) override {
    check_buffer(send, "allgather", kName);
    check_buffer(recv, "allgather", kName);
    check_allgather_buffers(send, recv, 1);
    if (send.data != recv.data && send.bytes() > 0)
      copy_bytes(recv.data, recv.device, send.data, send.device, size_t(send.bytes()));
    return done();
  }
  WorkHandle barrier(std::string_view) override { return done(); }

 private:
  static WorkHandle done() { return completed_work(); }
  static constexpr const char* kName = "one-rank communicator";

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

WorkHandle completed_work(std::string error) {
  return std::make_shared<CompletedWork>(std::move(error));
}

void check_buffer(const CommBuffer& buffer, const char* collective, const char* backend) {
  if (buffer.dtype != DType::f32 && buffer.dtype != DType::f64 && buffer.dtype != DType::i64 &&
      buffer.dtype != DType::bf16) {
    throw std::invalid_argument(std::string(collective) + ": dtype " + dtype_name(buffer.dtype) +
                                " is not supported by the " + backend +
                                " (use f32, f64, i64 or bf16)");
  }
  if (buffer.count < 0 || (buffer.count > 0 && buffer.data == nullptr)) {
    throw std::invalid_argument(std::string(collective) + ": a buffer of " +
                                std::to_string(buffer.count) + " elements at " +
                                (buffer.data ? "a valid address" : "nullptr") + " is not a buffer");
  }
  if (!supported_by_this_build(buffer.device)) {
    throw std::invalid_argument(std::string(collective) + ": the buffer is on " +
                                buffer.device.str() + " but this build has no CUDA");
  }
}

void check_reduction(const CommBuffer& buffer, ReduceOp op) {
  if (op == ReduceOp::avg && buffer.dtype == DType::bf16)
    throw std::invalid_argument(
        "allreduce avg of bf16 is not offered: the mean would be rounded to bf16 a second time, "
        "differently by each backend; sum the bf16 buffer and divide in float (as the gradient "
        "reducer does)");
}

void check_broadcast_root(int root, int world_size) {
  if (root < 0 || root >= world_size) {
    throw std::invalid_argument("broadcast root " + std::to_string(root) + " is not a rank of " +
                                std::to_string(world_size) + " (0.." +
                                std::to_string(world_size - 1) + ")");
  }
}

void check_allgather_buffers(const CommBuffer& send, const CommBuffer& recv, int world_size) {
  if (recv.dtype != send.dtype || recv.count != send.count * world_size) {
    throw std::invalid_argument(
        "allgather: the receive buffer holds " + std::to_string(recv.count) + " " +
        dtype_name(recv.dtype) +
        " elements; it must hold world_size x send count = " + std::to_string(world_size) + " x " +
        std::to_string(send.count) + " " + dtype_name(send.dtype) + " elements");
  }
}

std::unique_ptr<Communicator> make_single_rank_communicator(Backend backend) {
  return std::make_unique<SingleRankCommunicator>(backend);
}

}  // namespace bareyolo::dist
