// engine/trace.h — a timeline of what each rank spends its time on, in Chrome's trace-event
// format (Perfetto and chrome://tracing open it): named ranges on three tracks per process.
//
//   compute         "forward model.3", "backward model.3" (a graph node each), "loss",
//                   "optimizer step", "validation", "checkpoint last.safetensors"
//   communication   every collective, launched to done: "allreduce bucket 2" (the reducer's
//                   buckets), "syncbn model.4" (SyncBN's statistics inside node model.4),
//                   "allreduce loss items", ... — named by the label of the code that issued
//                   it (Label below), with args {op, bytes}
//   loader          "data wait": the training thread waiting for its next batch
//
// Recording is off until enable(true); a disabled Range costs one relaxed atomic load. Times
// are microseconds of the steady clock since the tracer's first use, which on one machine is
// the same clock in every process (CLOCK_MONOTONIC), so the ranks' timelines line up; across
// machines they do not. docs/ddp.md ("Watching a step") lists every event name.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace bareyolo::trace {

enum class Track { compute = 0, communication = 1, loader = 2 };
const char* track_name(Track track);

struct Event {
  std::string name;
  Track track = Track::compute;
  int64_t begin_us = 0, end_us = 0;
  std::string op;     // communication: allreduce, broadcast, allgather, barrier
  int64_t bytes = 0;  // communication: the buffer's size
};

bool enabled();
void enable(bool on);
int64_t now_us();
int64_t us_of(std::chrono::steady_clock::time_point time);  // on the same scale as now_us

// Adds a finished range (when enabled; thread-safe).
void record(Event event);
// The events recorded so far, in recording order: how many, those from the `first`-th on, and
// all of them, which take_events also forgets.
size_t event_count();
std::vector<Event> events_since(size_t first);
std::vector<Event> take_events();

// The innermost label of this thread's running code ("model.4", "bucket 2", "loss items"),
// which the collectives it issues are named after; "" outside any.
const std::string& current_label();

// Sets this thread's label for its lifetime (nothing when tracing is off).
class Label {
 public:
  explicit Label(std::string label);
  ~Label();
  Label(const Label&) = delete;
  Label& operator=(const Label&) = delete;

 private:
  bool active_;
  std::string previous_;
};

// Records [construction, destruction) as "<what> <label>" on `track`, and sets the label for
// the code inside (so a forward's SyncBN collectives are named after its node).
class Range {
 public:
  Range(Track track, const char* what, const std::string& label = "");
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  bool active_;
  Track track_;
  const char* what_;
  std::string label_, previous_label_;
  int64_t begin_us_ = 0;
};

// Chrome trace-event JSON ("traceEvents", one process per rank, one thread per track, with
// their names) of the events of every rank: events_of_rank[r] are rank r's.
std::string chrome_trace_json(const std::vector<std::vector<Event>>& events_of_rank);

}  // namespace bareyolo::trace
