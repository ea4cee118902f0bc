// engine/distributed/comm/traced_communicator.cpp — see traced_communicator.h.
#include "engine/distributed/comm/traced_communicator.h"

#include <string>

#include "engine/trace.h"

namespace bareyolo::dist {

namespace {

// The event's name: SyncBN's statistics travel inside a node's forward or backward, whose
// range set the label to the node ("model.4"); the reducer labels its buckets itself.
std::string event_name(const char* op, const std::string& label) {
  if (label.rfind("model.", 0) == 0) return "syncbn " + label;
  return label.empty() ? std::string(op) : std::string(op) + " " + label;
}

class TracedWork final : public Work {
 public:
  TracedWork(WorkHandle inner, trace::Event event)
      : inner_(std::move(inner)), event_(std::move(event)) {}
  ~TracedWork() override { record(); }

  void wait() override {
    inner_->wait();
    record();
  }
  bool completed() override { return inner_->completed(); }
  std::optional<std::chrono::steady_clock::time_point> finished_at() const override {
    return inner_->finished_at();
  }

 private:
  void record() {
    if (recorded_) return;
    recorded_ = true;
    const std::optional<std::chrono::steady_clock::time_point> finished = inner_->finished_at();
    event_.end_us = finished ? trace::us_of(*finished) : trace::now_us();
    trace::record(std::move(event_));
  }

  WorkHandle inner_;
  trace::Event event_;
  bool recorded_ = false;
};

class TracedCommunicator final : public Communicator {
 public:
  explicit TracedCommunicator(Communicator& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  Backend backend() const override { return inner_.backend(); }

  WorkHandle allreduce(CommBuffer buffer, ReduceOp op, std::string_view tag) override {
    return traced("allreduce", buffer.bytes(), [&] { return inner_.allreduce(buffer, op, tag); });
  }
  WorkHandle broadcast(CommBuffer buffer, int root, std::string_view tag) override {
    return traced("broadcast", buffer.bytes(), [&] { return inner_.broadcast(buffer, root, tag); });
  }
  WorkHandle allgather(CommBuffer send, CommBuffer recv, std::string_view tag) override {
    return traced("allgather", send.bytes(), [&] { return inner_.allgather(send, recv, tag); });
  }
  WorkHandle barrier(std::string_view tag) override {
    return traced("barrier", 0, [&] { return inner_.barrier(tag); });
  }
  void end_step() override { inner_.end_step(); }
  bool records_in_cuda_graphs() const override { return inner_.records_in_cuda_graphs(); }
  void begin_recording() override { inner_.begin_recording(); }
  RecordedCollectives end_recording() override { return inner_.end_recording(); }
  void replay(const RecordedCollectives& recording, std::string_view what,
              const std::function<void()>& launch) override {
    inner_.replay(recording, what, launch);
  }

 private:
  template <class Issue>
  WorkHandle traced(const char* op, int64_t bytes, const Issue& issue) {
    if (!trace::enabled()) return issue();
    trace::Event event{.name = event_name(op, trace::current_label()),
                       .track = trace::Track::communication,
                       .begin_us = trace::now_us(),
                       .end_us = 0,  // when done
                       .op = op,
                       .bytes = bytes};
    return std::make_shared<TracedWork>(issue(), std::move(event));
  }

  Communicator& inner_;
};

}  // namespace

std::unique_ptr<Communicator> traced(Communicator& inner) {
  return std::make_unique<TracedCommunicator>(inner);
}

}  // namespace bareyolo::dist
