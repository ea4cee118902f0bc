// engine/trace_analysis.cpp — see trace_analysis.h.
#include "engine/trace_analysis.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "engine/json_number.h"

namespace bareyolo::trace {

namespace {

bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

using Interval = std::pair<int64_t, int64_t>;

// The union of the ranges of `events` that `keep` selects, as disjoint sorted intervals.
template <class Keep>
std::vector<Interval> union_of(const std::vector<Event>& events, const Keep& keep) {
  std::vector<Interval> ranges;
  for (const Event& e : events)
    if (keep(e)) ranges.emplace_back(e.begin_us, e.end_us);
  std::sort(ranges.begin(), ranges.end());
  std::vector<Interval> merged;
  for (const Interval& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  return merged;
}

int64_t overlap(const Interval& range, const std::vector<Interval>& disjoint) {
  int64_t total = 0;
  for (const Interval& d : disjoint)
    total +=
        std::max<int64_t>(0, std::min(range.second, d.second) - std::max(range.first, d.first));
  return total;
}

bool is_optimizer_step(const Event& e) {
  return e.track == Track::compute && e.name == "optimizer step";
}
bool is_backward(const Event& e) {
  return e.track == Track::compute && starts_with(e.name, "backward ");
}
constexpr std::string_view kBucketPrefix = "allreduce bucket ";

// The number of a gradient bucket's all-reduce ("allreduce bucket 3"); nullopt for any other
// range, a name cut short or another number included ("allreduce bucket x").
std::optional<int> bucket_number(const Event& e) {
  if (e.track != Track::communication || !starts_with(e.name, kBucketPrefix.data()))
    return std::nullopt;
  const char* digits = e.name.data() + kBucketPrefix.size();
  const char* end = e.name.data() + e.name.size();
  int number = 0;
  const auto [stop, error] = std::from_chars(digits, end, number);
  if (error != std::errc() || stop != end || digits == end) return std::nullopt;
  return number;
}

bool is_bucket(const Event& e) { return bucket_number(e).has_value(); }

std::string kind_of(const Event& e) {
  if (starts_with(e.name, "syncbn ")) return "syncbn";
  if (is_bucket(e)) return "allreduce bucket";
  return e.name;
}

}  // namespace

StepShares step_shares(const std::vector<Event>& events) {
  StepShares shares;
  if (events.empty()) return shares;
  const std::vector<Interval> backward = union_of(events, is_backward);
  int64_t bucket_us = 0, hidden_us = 0, wait_us = 0, first = events.front().begin_us, last = first;
  for (const Event& e : events) {
    first = std::min(first, e.begin_us), last = std::max(last, e.end_us);
    if (is_optimizer_step(e)) ++shares.steps;
    if (e.track == Track::loader && e.name == "data wait") wait_us += e.end_us - e.begin_us;
    if (is_bucket(e)) {
      bucket_us += e.end_us - e.begin_us;
      hidden_us += overlap({e.begin_us, e.end_us}, backward);
    }
  }
  shares.hidden_communication = bucket_us > 0 ? double(hidden_us) / double(bucket_us) : 0;
  shares.loader_wait = last > first ? double(wait_us) / double(last - first) : 0;
  return shares;
}

std::optional<StepWindow> last_step(const std::vector<Event>& events) {
  const std::vector<Interval> steps = union_of(events, is_optimizer_step);
  if (steps.empty()) return std::nullopt;
  int64_t first = steps.back().first;
  for (const Event& e : events) first = std::min(first, e.begin_us);
  return StepWindow{.begin_us = steps.size() > 1 ? steps[steps.size() - 2].second : first,
                    .optimizer_begin_us = steps.back().first,
                    .end_us = steps.back().second};
}

StepAnatomy step_anatomy(const std::vector<Event>& events) {
  StepAnatomy anatomy;
  anatomy.steps = int(std::count_if(events.begin(), events.end(), is_optimizer_step));
  const std::vector<Interval> optimizer_steps = union_of(events, is_optimizer_step);
  if (optimizer_steps.size() > 1)
    anatomy.step_ms = double(optimizer_steps.back().second - optimizer_steps.front().second) / 1e3 /
                      double(optimizer_steps.size() - 1);
  int64_t first_forward = INT64_MAX;
  for (const Event& e : events)
    if (e.track == Track::compute && starts_with(e.name, "forward "))
      first_forward = std::min(first_forward, e.begin_us);
  for (const Event& e : events) {
    if (e.track != Track::communication) continue;
    CollectiveKind& kind =
        (e.begin_us < first_forward ? anatomy.startup : anatomy.kinds)[kind_of(e)];
    kind.smallest = kind.count == 0 ? e.bytes : std::min(kind.smallest, e.bytes);
    kind.largest = std::max(kind.largest, e.bytes);
    ++kind.count;
    kind.bytes += e.bytes;
  }
  const std::optional<StepWindow> last = last_step(events);
  if (!last) return anatomy;
  // The last step's buckets: launched between the step before it and its optimizer step,
  // during or after the backward that ended last before that.
  int64_t backward_end = 0;
  for (const Event& e : events)
    if (is_backward(e) && e.end_us <= last->optimizer_begin_us && e.begin_us >= last->begin_us)
      backward_end = std::max(backward_end, e.end_us);
  // The node whose backward ended last at or before `launch_us`, within the step.
  auto closer_of = [&](int64_t launch_us) {
    const Event* closer = nullptr;
    for (const Event& e : events)
      if (is_backward(e) && e.begin_us >= last->begin_us && e.end_us <= launch_us &&
          (closer == nullptr || e.end_us > closer->end_us))
        closer = &e;
    return closer ? closer->name.substr(std::string("backward ").size()) : std::string();
  };
  for (const Event& e : events) {
    if (!is_bucket(e) || e.begin_us < last->begin_us || e.begin_us > last->optimizer_begin_us)
      continue;
    anatomy.buckets.push_back({.bucket = *bucket_number(e),
                               .bytes = e.bytes,
                               .before_backward_end_ms = double(backward_end - e.begin_us) / 1e3,
                               .duration_ms = double(e.end_us - e.begin_us) / 1e3,
                               .closed_by = closer_of(e.begin_us)});
  }
  std::sort(anatomy.buckets.begin(), anatomy.buckets.end(),
            [](const BucketDeparture& a, const BucketDeparture& b) { return a.bucket < b.bucket; });
  return anatomy;
}

std::optional<MeetingCosts> meeting_costs(const std::vector<std::vector<Event>>& ranks,
                                          size_t longest) {
  if (ranks.size() < 2) return std::nullopt;
  std::vector<std::vector<const Event*>> meetings_of(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (const Event& e : ranks[r])
      if (e.track == Track::communication && kind_of(e) == "syncbn") meetings_of[r].push_back(&e);
    std::stable_sort(meetings_of[r].begin(), meetings_of[r].end(),
                     [](const Event* a, const Event* b) { return a->begin_us < b->begin_us; });
    if (meetings_of[r].size() != meetings_of[0].size()) return std::nullopt;
  }
  // A meeting's pass: the forward or backward range of rank 0 that holds it.
  auto pass_of = [&](const Event& meeting) -> std::string {
    for (const Event& e : ranks[0])
      if (e.track == Track::compute && e.begin_us <= meeting.begin_us &&
          meeting.end_us <= e.end_us) {
        if (starts_with(e.name, "forward ")) return " (forward)";
        if (starts_with(e.name, "backward ")) return " (backward)";
      }
    return "";
  };
  MeetingCosts costs;
  costs.meetings = int64_t(meetings_of[0].size());
  std::map<std::string, std::pair<int64_t, int64_t>> wait_by_name;  // total us, meetings
  for (size_t k = 0; k < meetings_of[0].size(); ++k) {
    int64_t shortest = INT64_MAX, longest_us = 0;
    for (const auto& meetings : meetings_of) {
      const int64_t us = meetings[k]->end_us - meetings[k]->begin_us;
      shortest = std::min(shortest, us), longest_us = std::max(longest_us, us);
    }
    costs.latency_ms += double(shortest) / 1e3;
    costs.wait_ms += double(longest_us - shortest) / 1e3;
    auto& [total, count] = wait_by_name[meetings_of[0][k]->name + pass_of(*meetings_of[0][k])];
    total += longest_us - shortest, ++count;
  }
  for (const auto& [name, total_count] : wait_by_name)
    costs.longest_waits_ms.emplace_back(
        name, double(total_count.first) / 1e3 / double(total_count.second));
  std::stable_sort(costs.longest_waits_ms.begin(), costs.longest_waits_ms.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (costs.longest_waits_ms.size() > longest) costs.longest_waits_ms.resize(longest);
  return costs;
}

namespace {

// The bounds of a trace event's numbers, far beyond any run's (timestamps count from the
// process's start: 407 days; a range lasts at most 12.7 days; a collective moves at most
// 1 TiB), so that the analysis's sums of millions of them stay within int64_t.
constexpr int64_t kMaxTimestampUs = int64_t(1) << 45;
constexpr int64_t kMaxDurationUs = int64_t(1) << 40;
constexpr int64_t kMaxBytes = int64_t(1) << 40;

// Field `key` of trace event `index` as a whole number in [low, high].
int64_t whole_field(const nlohmann::json& event, const char* key, size_t index, int64_t low,
                    int64_t high) {
  const std::string what = "trace event " + std::to_string(index) + "'s \"" + key + "\"";
  if (!event.contains(key)) throw std::invalid_argument(what + " is missing");
  return json_whole_number(event[key], low, high, what);
}

struct ParsedEvent {
  size_t rank = 0;
  std::optional<Event> range;  // a complete range ("ph": "X"); none for metadata
};

// Trace event `index` of `count`; throws std::invalid_argument naming what is wrong with it.
ParsedEvent parse_event(const nlohmann::json& e, size_t index, size_t count) {
  if (!e.is_object())
    throw std::invalid_argument("trace event " + std::to_string(index) + " is not an object");
  // Every rank names itself in events of its own, so a rank number beyond the event count is no
  // rank of this trace (and would make a vector of that many).
  ParsedEvent parsed{size_t(whole_field(e, "pid", index, 0, int64_t(count) - 1)), std::nullopt};
  if (e.value("ph", "") != "X") return parsed;
  const int64_t begin_us = whole_field(e, "ts", index, -kMaxTimestampUs, kMaxTimestampUs);
  const int64_t track = whole_field(e, "tid", index, int(Track::compute), int(Track::loader));
  Event event{.name = e.at("name").get<std::string>(),
              .track = Track(track),
              .begin_us = begin_us,
              .end_us = begin_us + whole_field(e, "dur", index, 0, kMaxDurationUs),
              .op = "",
              .bytes = 0};
  if (e.contains("args") && e["args"].is_object()) {
    event.op = e["args"].value("op", "");
    if (e["args"].contains("bytes"))
      event.bytes = whole_field(e["args"], "bytes", index, 0, kMaxBytes);
  }
  parsed.range = std::move(event);
  return parsed;
}

}  // namespace

std::vector<std::vector<Event>> events_from_chrome_json(const std::string& json) {
  const nlohmann::json trace = nlohmann::json::parse(json, nullptr, false);
  if (trace.is_discarded() || !trace.is_object() || !trace.contains("traceEvents") ||
      !trace["traceEvents"].is_array())
    throw std::invalid_argument("not a Chrome trace: no \"traceEvents\" array");
  const nlohmann::json& events = trace["traceEvents"];
  std::vector<std::vector<Event>> ranks;
  for (size_t i = 0; i < events.size(); ++i) {
    ParsedEvent parsed;
    try {
      parsed = parse_event(events[i], i, events.size());
    } catch (const nlohmann::json::exception& error) {  // a field of another type ("name": 3)
      throw std::invalid_argument("trace event " + std::to_string(i) + ": " + error.what());
    }
    if (ranks.size() <= parsed.rank) ranks.resize(parsed.rank + 1);
    if (parsed.range) ranks[parsed.rank].push_back(std::move(*parsed.range));
  }
  return ranks;
}

}  // namespace bareyolo::trace
