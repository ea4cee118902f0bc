// engine/trace.cpp — see trace.h.
#include "engine/trace.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>

namespace bareyolo::trace {

namespace {

std::atomic<bool> g_enabled{false};
std::mutex g_mutex;
std::vector<Event> g_events;  // guarded by g_mutex
thread_local std::string t_label;

const auto g_origin = std::chrono::steady_clock::now();

}  // namespace

const char* track_name(Track track) {
  switch (track) {
    case Track::compute:
      return "compute";
    case Track::communication:
      return "communication";
    case Track::loader:
      return "loader";
  }
  return "?";
}

bool enabled() { return g_enabled.load(std::memory_order_relaxed); }
void enable(bool on) { g_enabled.store(on, std::memory_order_relaxed); }

int64_t us_of(std::chrono::steady_clock::time_point time) {
  return std::chrono::duration_cast<std::chrono::microseconds>(time - g_origin).count();
}
int64_t now_us() { return us_of(std::chrono::steady_clock::now()); }

void record(Event event) {
  if (!enabled()) return;
  std::lock_guard lock(g_mutex);
  g_events.push_back(std::move(event));
}

size_t event_count() {
  std::lock_guard lock(g_mutex);
  return g_events.size();
}

std::vector<Event> events_since(size_t first) {
  std::lock_guard lock(g_mutex);
  return {g_events.begin() + int64_t(std::min(first, g_events.size())), g_events.end()};
}

std::vector<Event> take_events() {
  std::lock_guard lock(g_mutex);
  return std::exchange(g_events, {});
}

const std::string& current_label() { return t_label; }

Label::Label(std::string label) : active_(enabled()) {
  if (active_) previous_ = std::exchange(t_label, std::move(label));
}
Label::~Label() {
  if (active_) t_label = std::move(previous_);
}

Range::Range(Track track, const char* what, const std::string& label)
    : active_(enabled()), track_(track), what_(what) {
  if (!active_) return;
  label_ = label;
  previous_label_ = std::exchange(t_label, label.empty() ? t_label : label);
  begin_us_ = now_us();
}

Range::~Range() {
  if (!active_) return;
  t_label = std::move(previous_label_);
  record({.name = label_.empty() ? what_ : std::string(what_) + " " + label_,
          .track = track_,
          .begin_us = begin_us_,
          .end_us = now_us(),
          .op = "",
          .bytes = 0});
}

std::string chrome_trace_json(const std::vector<std::vector<Event>>& events_of_rank) {
  nlohmann::json trace_events = nlohmann::json::array();
  for (size_t rank = 0; rank < events_of_rank.size(); ++rank) {
    trace_events.push_back({{"ph", "M"},
                            {"name", "process_name"},
                            {"pid", rank},
                            {"args", {{"name", "rank " + std::to_string(rank)}}}});
    for (Track track : {Track::compute, Track::communication, Track::loader})
      trace_events.push_back({{"ph", "M"},
                              {"name", "thread_name"},
                              {"pid", rank},
                              {"tid", int(track)},
                              {"args", {{"name", track_name(track)}}}});
    for (const Event& e : events_of_rank[rank]) {
      nlohmann::json event = {
          {"ph", "X"},           {"name", e.name},   {"cat", track_name(e.track)},  {"pid", rank},
          {"tid", int(e.track)}, {"ts", e.begin_us}, {"dur", e.end_us - e.begin_us}};
      if (!e.op.empty()) event["args"] = {{"op", e.op}, {"bytes", e.bytes}};
      trace_events.push_back(std::move(event));
    }
  }
  return nlohmann::json{{"traceEvents", trace_events}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace bareyolo::trace
