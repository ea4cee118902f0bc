// engine/distributed/comm/traced_communicator.h — a communicator that puts each of its
// collectives on the trace's communication track (engine/trace.h), launched to done.
//
// The event is named after the issuing code's trace label: "allreduce bucket 2" from the
// reducer, "syncbn model.4" from a BatchNorm inside node model.4 (a collective issued inside
// a forward or backward range), "<op> <label>" otherwise; its args give the op and the bytes.
// "Done" is when the backend finished the collective where it says so (Work::finished_at:
// the TCP ring's comm thread), else when wait() returned. With tracing off it only forwards.
#pragma once

#include <memory>

#include "engine/distributed/comm/communicator.h"

namespace bareyolo::dist {

// `inner` with its collectives traced; everything else (rank, errors, ...) is inner's.
// `inner` must outlive the result.
std::unique_ptr<Communicator> traced(Communicator& inner);

}  // namespace bareyolo::dist
