// tests/unit/trace.cpp — the trace (engine/trace.h): ranges and labels, the traced
// communicator's names, the Chrome JSON round trip, and what trace_analysis.h reads from a
// timeline made by hand, where every share is known.
#include <doctest/doctest.h>

#include "engine/distributed/comm/traced_communicator.h"
#include "engine/trace.h"
#include "engine/trace_analysis.h"

using namespace bareyolo;
using trace::Event;
using trace::Track;

namespace {

Event range(const char* name, Track track, int64_t begin, int64_t end, int64_t bytes = 0) {
  return {.name = name,
          .track = track,
          .begin_us = begin,
          .end_us = end,
          .op = bytes ? "allreduce" : "",
          .bytes = bytes};
}

}  // namespace

TEST_CASE("trace: ranges and labels name what ran, and nothing is kept while disabled") {
  trace::take_events();
  trace::enable(false);
  { const trace::Range ignored(Track::compute, "forward", "model.1"); }
  CHECK(trace::event_count() == 0);

  trace::enable(true);
  auto comm = dist::make_single_rank_communicator();
  const std::unique_ptr<dist::Communicator> traced = dist::traced(*comm);
  double value = 1;
  {
    const trace::Range forward(Track::compute, "forward", "model.4");
    traced->allreduce(dist::CommBuffer::of(&value, 1), dist::ReduceOp::sum)->wait();
  }
  {
    const trace::Label bucket("bucket 2");
    traced->allreduce(dist::CommBuffer::of(&value, 1), dist::ReduceOp::avg)->wait();
  }
  traced->barrier()->wait();
  trace::enable(false);
  const std::vector<Event> events = trace::take_events();
  REQUIRE(events.size() == 4);
  CHECK(events[0].name == "syncbn model.4");  // a collective inside a node's forward
  CHECK(events[0].track == Track::communication);
  CHECK(events[0].bytes == 8);
  CHECK(events[1].name == "forward model.4");
  CHECK(events[2].name == "allreduce bucket 2");
  CHECK(events[3].name == "barrier");
  CHECK(trace::current_label().empty());  // every label restored
}

TEST_CASE("trace analysis: hidden communication, loader waits and bucket departures") {
  // One step: data wait 0-10, backward 20-60 (two nodes), bucket 0 launched at 30 done at 50
  // (all hidden), bucket 1 at 55-75 (5 of 20 hidden), optimizer step 75-80, SyncBN inside.
  const std::vector<Event> events = {
      range("broadcast", Track::communication, 0, 1, 800),  // the start-up's
      range("data wait", Track::loader, 0, 10),
      range("forward model.1", Track::compute, 10, 20),
      range("syncbn model.1", Track::communication, 12, 13, 64),
      range("backward model.1", Track::compute, 20, 40),
      range("backward model.0", Track::compute, 40, 60),
      range("allreduce bucket 0", Track::communication, 30, 50, 4000),
      range("allreduce bucket 1", Track::communication, 55, 75, 2000000),
      range("optimizer step", Track::compute, 75, 80),
  };
  const trace::StepShares shares = trace::step_shares(events);
  CHECK(shares.steps == 1);
  CHECK(shares.hidden_communication == doctest::Approx(25.0 / 40.0));
  CHECK(shares.loader_wait == doctest::Approx(10.0 / 80.0));
  const trace::StepAnatomy anatomy = trace::step_anatomy(events);
  CHECK(anatomy.kinds.at("allreduce bucket").count == 2);
  CHECK(anatomy.kinds.at("allreduce bucket").bytes == 2004000);
  CHECK(anatomy.kinds.at("allreduce bucket").smallest == 4000);
  CHECK(anatomy.kinds.at("syncbn").largest == 64);
  CHECK(anatomy.kinds.count("broadcast") == 0);
  CHECK(anatomy.startup.at("broadcast").bytes == 800);
  CHECK(anatomy.step_ms == 0);  // one step: no period to tell
  const std::vector<Event> three_steps = {range("optimizer step", Track::compute, 0, 10),
                                          range("optimizer step", Track::compute, 90, 110),
                                          range("optimizer step", Track::compute, 200, 210)};
  CHECK(trace::step_anatomy(three_steps).step_ms == doctest::Approx((210 - 10) / 2 / 1e3));
  REQUIRE(anatomy.buckets.size() == 2);
  // Durations in ms relative (scale 0): the default Approx's 1.2e-5 ms is 0.24 % of 5 us.
  CHECK(anatomy.buckets[0].before_backward_end_ms == doctest::Approx(0.030).scale(0));
  CHECK(anatomy.buckets[1].before_backward_end_ms == doctest::Approx(0.005).scale(0));
  CHECK(anatomy.buckets[1].duration_ms == doctest::Approx(0.020).scale(0));
  // Which backward closed each bucket: the last to end before it left.
  CHECK(anatomy.buckets[0].closed_by.empty());  // launched at 30, before any backward ended
  CHECK(anatomy.buckets[1].closed_by == "model.1");

  // The Chrome JSON keeps everything the analysis reads, per rank.
  const auto ranks = trace::events_from_chrome_json(trace::chrome_trace_json({events, {}}));
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[1].empty());
  CHECK(trace::step_shares(ranks[0]).hidden_communication ==
        doctest::Approx(shares.hidden_communication));
  CHECK(ranks[0][7].bytes == 2000000);
  CHECK_THROWS_WITH_AS(trace::events_from_chrome_json("{\"x\": 1}"),
                       doctest::Contains("traceEvents"), std::invalid_argument);
}

TEST_CASE("trace analysis: of two steps the last one's buckets, overlapping backward ranges") {
  // Step 1 (0-60): backward model.2 20-40 holding model.3's 22-28, then model.1's 30-45, so
  // the backward ran 20-45; bucket 0 at 25-35 is all hidden. Step 2 (60-160): backward
  // 120-145; bucket 0 at 130-150 is 15 of 20 hidden. Listed out of time order: the first event
  // is not the earliest.
  const std::vector<Event> events = {
      range("optimizer step", Track::compute, 50, 60),
      range("data wait", Track::loader, 0, 16),
      range("backward model.2", Track::compute, 20, 40),
      range("backward model.3", Track::compute, 22, 28),
      range("backward model.1", Track::compute, 30, 45),
      range("allreduce bucket 0", Track::communication, 25, 35, 100),
      range("backward model.1", Track::compute, 120, 145),
      range("allreduce bucket 0", Track::communication, 130, 150, 100),
      range("optimizer step", Track::compute, 150, 160),
  };
  const trace::StepShares shares = trace::step_shares(events);
  CHECK(shares.steps == 2);
  CHECK(shares.hidden_communication == doctest::Approx((10.0 + 15.0) / (10.0 + 20.0)));
  CHECK(shares.loader_wait == doctest::Approx(16.0 / 160.0));
  const trace::StepAnatomy anatomy = trace::step_anatomy(events);
  REQUIRE(anatomy.buckets.size() == 1);  // the last step's
  CHECK(anatomy.buckets[0].before_backward_end_ms == doctest::Approx(0.015).scale(0));
  CHECK(anatomy.buckets[0].closed_by.empty());  // launched at 130, before the backward ended
  CHECK(anatomy.step_ms == doctest::Approx(0.1));
}

TEST_CASE("trace analysis: a range named like a bucket without a number is no bucket") {
  // Found by fuzz/chrome_trace.cpp: "allreduce bucket unts" made step_anatomy throw stoi's
  // bare "stoi" from the middle of trace-summary.
  const std::vector<Event> events = {
      range("forward model.0", Track::compute, 0, 10),
      range("backward model.0", Track::compute, 10, 30),
      range("allreduce bucket 2", Track::communication, 20, 40, 400),
      range("allreduce bucket unts", Track::communication, 25, 35, 10),
      range("allreduce bucket 99999999999", Track::communication, 26, 36, 10),
      range("allreduce bucket 3x", Track::communication, 27, 37, 10),
      range("optimizer step", Track::compute, 40, 45),
  };
  const trace::StepAnatomy anatomy = trace::step_anatomy(events);
  REQUIRE(anatomy.buckets.size() == 1);
  CHECK(anatomy.buckets[0].bucket == 2);
  CHECK(anatomy.kinds.at("allreduce bucket").count == 1);
  CHECK(anatomy.kinds.at("allreduce bucket unts").count == 1);
  CHECK(anatomy.kinds.at("allreduce bucket 3x").count == 1);
  CHECK(trace::step_shares(events).hidden_communication == doctest::Approx(10.0 / 20.0));
}

TEST_CASE("trace reader: an event out of any trace's range is refused, naming it") {
  // Before: "pid": 1e18 made a vector of that many ranks, a float "ts" was cast undefined, and
  // "tid": 7 became a track that does not exist.
  const auto trace_of = [](const std::string& event) {
    return R"({"traceEvents":[{"name":"process_name","ph":"M","pid":0},)" + event + "]}";
  };
  const auto refusal = [&](const std::string& event) {
    try {
      trace::events_from_chrome_json(trace_of(event));
    } catch (const std::invalid_argument& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  const auto ranks =
      trace::events_from_chrome_json(trace_of(R"({"name":"a","ph":"X","pid":1,"tid":2,)"
                                              R"("ts":5,"dur":3,"args":{"bytes":7}})"));
  REQUIRE(ranks.size() == 2);
  REQUIRE(ranks[1].size() == 1);
  CHECK(ranks[1][0].track == Track::loader);
  CHECK(ranks[1][0].end_us == 8);
  CHECK(ranks[1][0].bytes == 7);
  CHECK(refusal(R"({"name":"a","ph":"X","pid":2,"tid":0,"ts":5,"dur":3})") ==
        "trace event 1's \"pid\" is 2, not a whole number in [0, 1]");
  CHECK(refusal(R"({"name":"a","ph":"X","pid":1,"tid":7,"ts":5,"dur":3})").find("\"tid\" is 7") !=
        std::string::npos);
  CHECK(refusal(R"({"name":"a","ph":"X","pid":1,"tid":0,"ts":1e300,"dur":3})")
            .find("\"ts\" is 1e+300") != std::string::npos);
  CHECK(refusal(R"({"name":"a","ph":"X","pid":1,"tid":0,"ts":5,"dur":-3})").find("\"dur\" is -3") !=
        std::string::npos);
  CHECK(refusal(R"({"name":3,"ph":"X","pid":1,"tid":0,"ts":5,"dur":3})")
            .starts_with("trace event 1: "));
  CHECK(refusal("7") == "trace event 1 is not an object");
}

TEST_CASE("trace analysis: SyncBN meetings split into latency and waits over the ranks") {
  // Three meetings; rank 1 arrives last at the first and third, rank 0 at the second. Rank
  // 0's compute ranges give the first its pass (forward) and the third its (backward).
  const std::vector<Event> rank0 = {
      range("forward model.1", Track::compute, 0, 11),
      range("syncbn model.1", Track::communication, 0, 10, 64),
      range("backward model.1", Track::compute, 29, 33),
      range("allreduce bucket 0", Track::communication, 12, 40, 4000),  // not a meeting
      range("syncbn model.2", Track::communication, 20, 21, 64),
      range("syncbn model.1", Track::communication, 30, 32, 64),
  };
  const std::vector<Event> rank1 = {
      range("syncbn model.1", Track::communication, 5, 10, 64),
      range("syncbn model.2", Track::communication, 15, 21, 64),
      range("syncbn model.1", Track::communication, 30, 35, 64),
  };
  const std::optional<trace::MeetingCosts> costs = trace::meeting_costs({rank0, rank1});
  REQUIRE(costs.has_value());
  CHECK(costs->meetings == 3);
  // Relative (scale 0), as in the first test case.
  CHECK(costs->latency_ms == doctest::Approx((5 + 1 + 2) / 1e3).scale(0));
  CHECK(costs->wait_ms == doctest::Approx((5 + 5 + 3) / 1e3).scale(0));
  REQUIRE(costs->longest_waits_ms.size() == 3);
  CHECK(costs->longest_waits_ms[0].first == "syncbn model.1 (forward)");
  CHECK(costs->longest_waits_ms[0].second == doctest::Approx(5 / 1e3).scale(0));
  CHECK(costs->longest_waits_ms[1].first == "syncbn model.2");  // in no range: no pass
  CHECK(costs->longest_waits_ms[2].first == "syncbn model.1 (backward)");
  CHECK(costs->longest_waits_ms[2].second == doctest::Approx(3 / 1e3).scale(0));
  CHECK(trace::meeting_costs({rank0, rank1}, 1)->longest_waits_ms.size() == 1);  // the longest
  CHECK_FALSE(trace::meeting_costs({rank0}).has_value());              // one rank meets nobody
  CHECK_FALSE(trace::meeting_costs({rank0, {rank1[0]}}).has_value());  // cut short
}
