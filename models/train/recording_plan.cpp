// models/train/recording_plan.cpp — see recording_plan.h.
#include "models/train/recording_plan.h"

#include <utility>

#include "engine/trace.h"

namespace bareyolo::models {

void RecordingPlanVote::propose(dist::Communicator* comm, const RecordingPlan& mine) {
  // A proposal left unread (the step that made it threw) is read first: until then the
  // all-reduce owns the buffer.
  if (work_) std::exchange(work_, nullptr)->wait();
  words_[0] = mine.rows_capacity;
  words_[1] = mine.record_again ? 1 : 0;
  if (!comm) return;
  const trace::Label label("recording plan");
  work_ = comm->allreduce(dist::CommBuffer::of(words_, 2), dist::ReduceOp::max, "recording plan");
}

RecordingPlan RecordingPlanVote::agreed() {
  if (work_) std::exchange(work_, nullptr)->wait();
  return {.rows_capacity = words_[0], .record_again = words_[1] != 0};
}

}  // namespace bareyolo::models
