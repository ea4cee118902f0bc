// tests/unit/trace_svg.cpp — the SVG timeline of a traced step (engine/trace_svg.h), drawn
// from a two-rank trace made by hand: one rectangle per range of the step and none of the step
// before it, x proportional to time on one axis for both ranks, rank 0's rows above rank 1's,
// buckets labelled and stacked when they overlap, names escaped.
#include <doctest/doctest.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "engine/trace_svg.h"

using namespace bareyolo;
using trace::Event;
using trace::Track;

namespace {

Event range(const std::string& name, Track track, int64_t begin, int64_t end, int64_t bytes = 0) {
  return {.name = name, .track = track, .begin_us = begin, .end_us = end, .op = "", .bytes = bytes};
}

struct Rect {
  double x, y, width;
};

// The ranges' rectangles by the name their <title> starts with.
std::map<std::string, Rect> ranges_of(const std::string& svg) {
  static const std::regex rect(
      "<rect class=\"range\" x=\"([0-9.]+)\" y=\"([0-9.]+)\" width=\"([0-9.]+)\"[^>]*><title>"
      "([^<:]+):");
  std::map<std::string, Rect> ranges;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), rect); it != std::sregex_iterator();
       ++it) {
    const std::smatch& m = *it;
    ranges[m[4]] = {std::stod(m[1]), std::stod(m[2]), std::stod(m[3])};
  }
  return ranges;
}

// Rank `rank`'s group of the SVG, from its <g> to its end.
std::string rank_group(const std::string& svg, int rank) {
  const size_t begin = svg.find("<g class=\"rank\" id=\"rank" + std::to_string(rank) + "\">");
  REQUIRE(begin != std::string::npos);
  return svg.substr(begin, svg.find("</g>", begin) - begin);
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

}  // namespace

TEST_CASE("trace svg: one rectangle per range of the last step, x proportional to time") {
  // Rank 0: a first step ending at 100 us (not drawn), then the step drawn, 100-1100 us.
  // Rank 1 ends its step later, at 1300 us: the window is 100-1300 us for both.
  const std::vector<Event> rank0 = {
      range("forward model.0", Track::compute, 0, 50),
      range("optimizer step", Track::compute, 50, 100),
      range("data wait", Track::loader, 100, 200),
      range("forward model.0", Track::compute, 200, 400),
      range("syncbn model.0", Track::communication, 300, 301),  // narrower than a pixel
      range("loss", Track::compute, 400, 500),
      range("backward model.1", Track::compute, 500, 700),
      range("backward <model>&\"0\"", Track::compute, 700, 900),
      range("allreduce bucket 0", Track::communication, 700, 950),
      range("allreduce bucket 1", Track::communication, 900, 1000),  // overlaps bucket 0
      range("allreduce loss items", Track::communication, 1000, 1010),
      range("optimizer step", Track::compute, 1000, 1100),
  };
  const std::vector<Event> rank1 = {
      range("optimizer step", Track::compute, 60, 120),
      range("forward model.0", Track::compute, 150, 500),
      range("optimizer step", Track::compute, 1200, 1300),
  };
  const std::string svg = trace::step_svg({rank0, rank1});

  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.find("</svg>") == svg.size() - 7);
  // Every range of the window is one rectangle; rank 0's first step and rank 1's first
  // optimizer step (60-120 us, partly inside) are: 10 + 2 ranges of the window, 1 clipped.
  CHECK(count_of(svg, "<rect class=\"range\"") == 10 + 3);
  CHECK(count_of(svg, "<title>forward model.0:") == 2);
  CHECK(count_of(svg, "<title>optimizer step:") == 3);
  CHECK(svg.find("0.000 - 0.100 ms") != std::string::npos);  // rank 0's data wait, from 100 us

  // Names are escaped: no raw '<', '&' or '"' from a name reaches the document.
  CHECK(svg.find("backward &lt;model&gt;&amp;&quot;0&quot;") != std::string::npos);
  CHECK(svg.find("<model>") == std::string::npos);

  const std::map<std::string, Rect> r = ranges_of(svg);
  const Rect wait = r.at("data wait"), loss = r.at("loss"), bucket0 = r.at("allreduce bucket 0"),
             bucket1 = r.at("allreduce bucket 1"), meeting = r.at("syncbn model.0");
  // x is linear in time: px per us from two ranges, then a third lands where it must.
  const double px_per_us = (loss.x - wait.x) / (400 - 100);
  CHECK(px_per_us > 0);
  CHECK(bucket0.x == doctest::Approx(wait.x + px_per_us * (700 - 100)).epsilon(0.001));
  CHECK(loss.width == doctest::Approx(px_per_us * 100).epsilon(0.01));
  CHECK(bucket0.width == doctest::Approx(px_per_us * 250).epsilon(0.01));
  CHECK(meeting.width == doctest::Approx(1.0));  // widened to a pixel
  // The window spans both ranks' steps: 1200 us in the plot's width, the same for both.
  CHECK(px_per_us * 1200 > 500);
  CHECK(px_per_us * 1200 < 1200);
  // Overlapping buckets take two lanes of the bucket row; each carries its number.
  CHECK(bucket1.y > bucket0.y);
  CHECK(svg.find("class=\"bucket-label\"") != std::string::npos);
  CHECK(count_of(svg, "class=\"bucket-label\"") == 2);

  // Ranks in order, one group each, rank 0 above rank 1.
  const size_t group0 = svg.find("<g class=\"rank\" id=\"rank0\">"),
               group1 = svg.find("<g class=\"rank\" id=\"rank1\">");
  REQUIRE(group0 != std::string::npos);
  REQUIRE(group1 != std::string::npos);
  CHECK(group0 < group1);
  const std::map<std::string, Rect> r1 = ranges_of(rank_group(svg, 1));
  REQUIRE(r1.count("forward model.0") == 1);
  CHECK(r1.at("forward model.0").y > bucket1.y);
  CHECK(r1.at("forward model.0").x == doctest::Approx(wait.x + px_per_us * 50).epsilon(0.001));
  // The legend names every kind; the backward-end marker is drawn on rank 0 only.
  for (const char* legend :
       {"forward", "backward", "gradient bucket", "SyncBN meeting", "data wait", "optimizer step"})
    CHECK(svg.find(std::string(">") + legend + "</text>") != std::string::npos);
  CHECK(count_of(svg, "class=\"backward-end\"") == 1);
  CHECK(svg.find(">1.2</text>") != std::string::npos);  // the axis's last tick: the window's end
}

TEST_CASE("trace svg: the window from the earliest rank, clipped ranges, lanes and markers") {
  // Rank 0's step runs 100-1000 us, rank 1's from 40 us: the window is 40-1000 for both, and
  // rank 1's forward from 20 us is clipped to it. Rank 0's next backward, from 1000 us, is past
  // the window. Bucket 1 begins after bucket 0 ends but on bucket 0's label: another lane.
  const std::vector<Event> rank0 = {
      range("optimizer step", Track::compute, 0, 100),
      range("data wait", Track::loader, 100, 150),
      range("syncbn model.0", Track::communication, 200, 210),
      range("backward model.0", Track::compute, 300, 500),
      range("allreduce bucket 0", Track::communication, 500, 501, 4096),
      range("allreduce bucket 1", Track::communication, 503, 600),
      range("optimizer step", Track::compute, 900, 1000),
      range("backward model.0", Track::compute, 1000, 1100),
  };
  const std::vector<Event> rank1 = {
      range("optimizer step", Track::compute, 0, 40),
      range("forward model.0", Track::compute, 20, 60),
      range("optimizer step", Track::compute, 800, 900),
  };
  const std::string svg = trace::step_svg({rank0, rank1});
  const std::map<std::string, Rect> r = ranges_of(svg);
  const Rect wait = r.at("data wait"), backward = r.at("backward model.0");
  const double px_per_us = (backward.x - wait.x) / (300 - 100);
  const std::string rank1_part = rank_group(svg, 1);
  const std::map<std::string, Rect> r1 = ranges_of(rank1_part);
  REQUIRE(r1.count("forward model.0") == 1);
  CHECK(r1.at("forward model.0").x == doctest::Approx(wait.x - px_per_us * 60).epsilon(0.001));
  CHECK(r1.at("forward model.0").width == doctest::Approx(px_per_us * 20).epsilon(0.01));

  CHECK(r.at("allreduce bucket 1").y > r.at("allreduce bucket 0").y);  // its label's lane taken
  CHECK(svg.find("<title>allreduce bucket 0: 0.460 - 0.461 ms, 4096 bytes</title>") !=
        std::string::npos);
  // The meeting wears the legend's SyncBN colour.
  std::smatch legend;
  REQUIRE(std::regex_search(svg, legend, std::regex("fill=\"(#[0-9a-f]+)\"/><text[^>]*>SyncBN")));
  CHECK(svg.find("fill=\"" + legend[1].str() + "\"><title>syncbn model.0:") != std::string::npos);
  // The backward-end marker at rank 0's backward that ends inside the window (500 us).
  std::smatch marker;
  REQUIRE(std::regex_search(svg, marker, std::regex("class=\"backward-end\" x1=\"([0-9.]+)\"")));
  CHECK(std::stod(marker[1]) == doctest::Approx(backward.x + backward.width).epsilon(0.001));
  // Rank 1's empty bucket row keeps a lane's height, as its compute row has.
  std::map<std::string, double> row_y;
  static const std::regex row_name("<text class=\"row-name\" x=\"14\" y=\"([0-9.]+)\">([a-z ]+)<");
  for (auto it = std::sregex_iterator(rank1_part.begin(), rank1_part.end(), row_name);
       it != std::sregex_iterator(); ++it)
    row_y[(*it)[2]] = std::stod((*it)[1]);
  REQUIRE(row_y.size() == 4);
  CHECK(row_y["collectives"] - row_y["gradient buckets"] ==
        doctest::Approx(row_y["gradient buckets"] - row_y["compute"]));

  // A step that took no time still gets a window of a microsecond: finite coordinates.
  const std::string instant = trace::step_svg({{range("optimizer step", Track::compute, 50, 50)}});
  CHECK(instant.find("nan") == std::string::npos);
  CHECK(instant.find("inf") == std::string::npos);
}

TEST_CASE("trace svg: a trace without an optimizer step is refused, saying what to trace") {
  const std::vector<Event> forward_only = {range("forward model.0", Track::compute, 0, 10)};
  CHECK_THROWS_WITH_AS(trace::step_svg({forward_only}), doctest::Contains("--trace-steps"),
                       std::invalid_argument);
}
