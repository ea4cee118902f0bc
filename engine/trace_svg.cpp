// engine/trace_svg.cpp — see trace_svg.h.
#include "engine/trace_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "engine/trace_analysis.h"
#include "engine/xml_escape.h"

namespace bareyolo::trace {

namespace {

// The page, in px: a column of row names, then the plot.
constexpr double kWidth = 1200, kPlotLeft = 130, kPlotRight = kWidth - 20;
constexpr double kHeaderHeight = 30, kRankTitleHeight = 18, kLaneHeight = 12, kLaneGap = 2,
                 kRowGap = 5, kRankGap = 12, kAxisHeight = 34, kLegendHeight = 26;
constexpr double kMinRangeWidth = 1;         // a SyncBN meeting lasts a fraction of a pixel
constexpr double kBucketLabelCharWidth = 6;  // of the 9-px label font, to keep labels apart
constexpr double kLegendCharWidth = 6.2;     // of the 11-px font, to space the legend's entries

enum class Row { compute, buckets, collectives, loader };
constexpr Row kRows[] = {Row::compute, Row::buckets, Row::collectives, Row::loader};

const char* row_name(Row row) {
  switch (row) {
    case Row::compute:
      return "compute";
    case Row::buckets:
      return "gradient buckets";
    case Row::collectives:
      return "collectives";
    case Row::loader:
      return "loader";
  }
  return "?";
}

// What a range is drawn as: its legend entry, its colour and its row.
enum class Kind {
  forward,
  backward,
  loss,
  optimizer_step,
  other_compute,
  bucket,
  syncbn,
  other_collective,
  data_wait
};
struct Category {
  const char* legend;
  const char* fill;
  Row row;
};
constexpr Category kCategories[] = {
    // in Kind's order
    {"forward", "#4e79a7", Row::compute},
    {"backward", "#f28e2b", Row::compute},
    {"loss", "#e15759", Row::compute},
    {"optimizer step", "#76b7b2", Row::compute},
    {"other compute", "#bab0ac", Row::compute},
    {"gradient bucket", "#59a14f", Row::buckets},
    {"SyncBN meeting", "#b07aa1", Row::collectives},
    {"other collective", "#9c755f", Row::collectives},
    {"data wait", "#edc948", Row::loader},
};

constexpr std::string_view kBucketPrefix = "allreduce bucket ";  // then the bucket's number

bool starts_with(const std::string& text, std::string_view prefix) {
  return text.rfind(prefix, 0) == 0;
}

Kind kind_of(const Event& e) {
  switch (e.track) {
    case Track::compute:
      if (starts_with(e.name, "forward ")) return Kind::forward;
      if (starts_with(e.name, "backward ")) return Kind::backward;
      if (e.name == "loss") return Kind::loss;
      if (e.name == "optimizer step") return Kind::optimizer_step;
      return Kind::other_compute;
    case Track::communication:
      if (starts_with(e.name, kBucketPrefix)) return Kind::bucket;
      if (starts_with(e.name, "syncbn ")) return Kind::syncbn;
      return Kind::other_collective;
    case Track::loader:
      return Kind::data_wait;
  }
  return Kind::other_compute;
}

const Category& category_of(const Event& e) { return kCategories[size_t(kind_of(e))]; }

// printf into a std::string: an element of the SVG with its numbers.
__attribute__((format(printf, 1, 2))) std::string format(const char* pattern, ...) {
  va_list args, copy;
  va_start(args, pattern);
  va_copy(copy, args);
  const int length = std::vsnprintf(nullptr, 0, pattern, copy);
  va_end(copy);
  std::string text(size_t(std::max(length, 0)), '\0');
  std::vsnprintf(text.data(), text.size() + 1, pattern, args);
  va_end(args);
  return text;
}

// Time to x: the window [begin_us, end_us] spans the plot.
struct TimeAxis {
  int64_t begin_us = 0, end_us = 0;
  double px_per_us() const { return (kPlotRight - kPlotLeft) / double(end_us - begin_us); }
  double x(int64_t us) const { return kPlotLeft + double(us - begin_us) * px_per_us(); }
};

// The window that holds the last traced step of every rank.
TimeAxis step_window(const std::vector<std::vector<Event>>& ranks) {
  std::optional<TimeAxis> axis;
  for (const std::vector<Event>& events : ranks) {
    const std::optional<StepWindow> step = last_step(events);
    if (!step) continue;
    if (!axis) axis = TimeAxis{step->begin_us, step->end_us};
    axis->begin_us = std::min(axis->begin_us, step->begin_us);
    axis->end_us = std::max(axis->end_us, step->end_us);
  }
  if (!axis)
    throw std::invalid_argument(
        "the trace holds no \"optimizer step\" range, so there is no step to draw: trace at least "
        "one whole optimizer step (train --trace-steps)");
  axis->end_us = std::max(axis->end_us, axis->begin_us + 1);
  return *axis;
}

// A range on the plot: where it begins and ends and, for a bucket, its label.
struct Drawn {
  const Event* event;
  double x0, x1;
  std::string label;
  double width() const { return std::max(x1 - x0, kMinRangeWidth); }
  // Where the next range of its lane may begin: a range widened to a pixel may touch the next,
  // which then still shares its lane, but a label must not be covered.
  double extent_end() const {
    return label.empty() ? x1 : std::max(x1, x0 + 2 + kBucketLabelCharWidth * double(label.size()));
  }
};

// The ranges of one rank's row inside the window, in lanes: each takes the first lane whose
// last range (and label) ended before it begins.
std::vector<std::vector<Drawn>> lanes_of(const std::vector<Event>& events, Row row,
                                         const TimeAxis& axis) {
  std::vector<Drawn> drawn;
  for (const Event& e : events) {
    if (category_of(e).row != row || e.end_us <= axis.begin_us || e.begin_us >= axis.end_us)
      continue;
    const double x0 = axis.x(std::max(e.begin_us, axis.begin_us));
    const double x1 = axis.x(std::min(e.end_us, axis.end_us));
    const std::string label = kind_of(e) == Kind::bucket ? e.name.substr(kBucketPrefix.size()) : "";
    drawn.push_back({&e, x0, x1, label});
  }
  std::stable_sort(drawn.begin(), drawn.end(),
                   [](const Drawn& a, const Drawn& b) { return a.x0 < b.x0; });
  std::vector<std::vector<Drawn>> lanes;
  for (const Drawn& d : drawn) {
    auto free_lane = std::find_if(lanes.begin(), lanes.end(), [&](const std::vector<Drawn>& lane) {
      return lane.back().extent_end() <= d.x0;
    });
    if (free_lane == lanes.end()) free_lane = lanes.insert(lanes.end(), std::vector<Drawn>{});
    free_lane->push_back(d);
  }
  if (lanes.empty()) lanes.emplace_back();  // an empty row keeps its place
  return lanes;
}

std::string range_svg(const Drawn& d, double y, const TimeAxis& axis) {
  const Event& e = *d.event;
  const Category& category = category_of(e);
  std::string title =
      format("%s: %.3f - %.3f ms", e.name.c_str(), double(e.begin_us - axis.begin_us) / 1e3,
             double(e.end_us - axis.begin_us) / 1e3);
  if (e.bytes > 0) title += format(", %lld bytes", static_cast<long long>(e.bytes));
  std::string svg = format(
      "<rect class=\"range\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\">",
      d.x0, y, d.width(), kLaneHeight, category.fill);
  svg += "<title>" + xml_escaped(title) + "</title></rect>\n";
  if (!d.label.empty())
    svg += format("<text class=\"bucket-label\" x=\"%.2f\" y=\"%.1f\">", d.x0 + 2,
                  y + kLaneHeight - 3) +
           xml_escaped(d.label) + "</text>\n";
  return svg;
}

// One rank's group of rows from `top`; returns the group and moves `top` below it.
std::string rank_svg(size_t rank, const std::vector<Event>& events, const TimeAxis& axis,
                     double& top) {
  std::string svg = format("<g class=\"rank\" id=\"rank%zu\">\n", rank);
  svg += format("<text class=\"rank-title\" x=\"4\" y=\"%.1f\">rank %zu</text>\n", top + 13, rank);
  const double group_top = top;
  top += kRankTitleHeight;
  for (const Row row : kRows) {
    const std::vector<std::vector<Drawn>> lanes = lanes_of(events, row, axis);
    svg += format("<text class=\"row-name\" x=\"14\" y=\"%.1f\">%s</text>\n", top + kLaneHeight - 2,
                  row_name(row));
    for (const std::vector<Drawn>& lane : lanes) {
      for (const Drawn& d : lane) svg += range_svg(d, top, axis);
      top += kLaneHeight + kLaneGap;
    }
    top += kRowGap;
  }
  int64_t backward_end = INT64_MIN;
  for (const Event& e : events)
    if (kind_of(e) == Kind::backward && e.end_us <= axis.end_us)
      backward_end = std::max(backward_end, e.end_us);
  if (backward_end >= axis.begin_us) {
    const double x = axis.x(backward_end);
    svg += format(
        "<line class=\"backward-end\" x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>\n"
        "<text class=\"marker\" x=\"%.2f\" y=\"%.1f\" text-anchor=\"end\">backward ends"
        "</text>\n",
        x, group_top + 4, x, top - kRowGap, x - 3, group_top + 13);
  }
  top += kRankGap;
  return svg + "</g>\n";
}

// Tick spacing of 1, 2 or 5 x 10^k ms giving about eight ticks over `span_ms`.
double tick_ms(double span_ms) {
  const double rough = span_ms / 8, power = std::pow(10.0, std::floor(std::log10(rough)));
  for (const double step : {1.0, 2.0, 5.0})
    if (step * power >= rough) return step * power;
  return 10 * power;
}

std::string axis_svg(const TimeAxis& axis, double top) {
  const double span_ms = double(axis.end_us - axis.begin_us) / 1e3, step = tick_ms(span_ms);
  std::string svg = "<g class=\"axis\">\n";
  svg += format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n",
                kPlotLeft, top, kPlotRight, top);
  for (double ms = 0; ms <= span_ms + 1e-9; ms += step) {
    const double x = axis.x(axis.begin_us + int64_t(std::llround(ms * 1e3)));
    svg += format("<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#333\"/>", x, top,
                  x, top + 4);
    svg +=
        format("<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x, top + 15, ms);
  }
  svg +=
      format("<text x=\"%.1f\" y=\"%.1f\">ms from the step's start</text>\n", kPlotLeft, top + 28);
  return svg + "</g>\n";
}

std::string legend_svg(double top) {
  std::string svg = "<g class=\"legend\">\n";
  double x = kPlotLeft;
  for (const Category& category : kCategories) {
    svg += format("<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/>", x, top,
                  category.fill);
    svg += format("<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x + 13, top + 9, category.legend);
    x += 13 + kLegendCharWidth * double(std::strlen(category.legend)) + 14;
  }
  return svg + "</g>\n";
}

}  // namespace

std::string step_svg(const std::vector<std::vector<Event>>& ranks) {
  const TimeAxis axis = step_window(ranks);
  std::string body;
  double top = kHeaderHeight;
  for (size_t rank = 0; rank < ranks.size(); ++rank) body += rank_svg(rank, ranks[rank], axis, top);
  body += axis_svg(axis, top);
  top += kAxisHeight;
  body += legend_svg(top);
  top += kLegendHeight;

  std::string svg = format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"11\">\n",
      kWidth, top, kWidth, top);
  svg +=
      "<style>.bucket-label{font-size:9px;fill:#222}.rank-title{font-weight:bold}"
      ".backward-end{stroke:#333;stroke-dasharray:4 3}.marker{font-size:9px;fill:#333}</style>\n";
  svg += format("<rect width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", kWidth, top);
  svg += format(
      "<text x=\"4\" y=\"18\" font-size=\"13\">The last traced optimizer step of %zu rank(s): "
      "%.1f ms</text>\n",
      ranks.size(), double(axis.end_us - axis.begin_us) / 1e3);
  return svg + body + "</svg>\n";
}

}  // namespace bareyolo::trace
