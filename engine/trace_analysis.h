// engine/trace_analysis.h — what a trace says about a data-parallel step (engine/trace.h's
// events): how much of the gradient communication backward hid, how long the loader kept
// the rank waiting, the anatomy of a step — its collectives by kind and size, and when each
// gradient bucket left — and what SyncBN's meetings cost in latency and in waiting.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/trace.h"

namespace bareyolo::trace {

struct StepShares {
  int steps = 0;                    // "optimizer step" ranges seen
  double hidden_communication = 0;  // of the bucket all-reduces' time, the share during backward
  double loader_wait = 0;           // of the traced time, the share spent in "data wait"
};

// Over one rank's events (any window of whole steps).
StepShares step_shares(const std::vector<Event>& events);

// The collectives of one kind ("allreduce bucket", "syncbn", "allreduce loss counts", ...).
struct CollectiveKind {
  int64_t count = 0;
  int64_t bytes = 0, smallest = 0, largest = 0;
};

struct BucketDeparture {
  int bucket = 0;
  int64_t bytes = 0;
  double before_backward_end_ms = 0;  // > 0: it left while backward still ran
  double duration_ms = 0;             // launched to done
  // The node whose backward closed the bucket: the one that ended last before the bucket left
  // (the reducer launches a bucket right after the backward that made its last gradient
  // final); "" when no backward of the step had ended.
  std::string closed_by;
};

// One rank's last traced step: from the end of the optimizer step before it (or the first
// event, when it is the first traced) to the end of its own optimizer step, which began at
// optimizer_begin_us.
struct StepWindow {
  int64_t begin_us = 0, optimizer_begin_us = 0, end_us = 0;
};
std::optional<StepWindow> last_step(const std::vector<Event>& events);

struct StepAnatomy {
  int steps = 0;
  double step_ms = 0;  // from one optimizer step's end to the next, averaged (0: one step)
  std::map<std::string, CollectiveKind> kinds;    // over all traced steps
  std::map<std::string, CollectiveKind> startup;  // before the first forward (a 0:B window)
  std::vector<BucketDeparture> buckets;           // of the last traced step's last backward
};

// One rank's anatomy; a kind is the event name without its node ("syncbn model.4" ->
// "syncbn"), so a step's many SyncBN collectives count as one kind.
StepAnatomy step_anatomy(const std::vector<Event>& events);

// What SyncBN's meetings cost, over all ranks' events. Every rank issues the same collectives
// in the same order, so the k-th "syncbn" range of each rank is one meeting; each range runs
// from its launch to its result. The rank that arrives last spends only the latency in it;
// the others also wait for that rank. Per meeting: latency = the shortest range, wait = the
// longest minus the shortest (what the first rank to arrive waited).
struct MeetingCosts {
  int64_t meetings = 0;  // over all traced steps
  double latency_ms = 0, wait_ms = 0;
  // The meetings that waited longest on average, by name and pass ("syncbn model.0 (forward)",
  // from rank 0's range that holds it), longest first.
  std::vector<std::pair<std::string, double>> longest_waits_ms;
};
// Empty with fewer than two ranks or when the ranks' meeting counts differ (a cut-short trace).
std::optional<MeetingCosts> meeting_costs(const std::vector<std::vector<Event>>& ranks,
                                          size_t longest = 3);

// The events of each rank of a Chrome trace that chrome_trace_json wrote. Throws
// std::invalid_argument naming what is missing when `json` is not such a trace.
std::vector<std::vector<Event>> events_from_chrome_json(const std::string& json);

}  // namespace bareyolo::trace
