// models/train/outputs/report.cpp — see report.h.
#include "models/train/outputs/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string_view>

#include "data/regular_file.h"
#include "engine/atomic_file.h"
#include "engine/trace_analysis.h"
#include "engine/xml_escape.h"
#include "models/train/outputs/plots.h"

namespace bareyolo::models {

namespace {

constexpr double kWidth = 460, kHeight = 260;
constexpr double kLeft = 64, kRight = 12, kTop = 28, kBottom = 58;  // plot margins

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

std::string coordinate(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v);
  return text;
}

// [min, max] of the finite values, widened when flat so the line sits mid-plot.
std::pair<double, double> value_range(const std::vector<ChartSeries>& series) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const ChartSeries& s : series)
    for (double v : s.values)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) return {0, 1};
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) {
    const double pad = std::max(std::abs(hi) * 0.05, 1e-6);
    return {lo - pad, hi + pad};
  }
  return {lo, hi};
}

}  // namespace

std::string svg_line_chart(const std::string& title, const std::vector<double>& x,
                           const std::vector<ChartSeries>& series) {
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  const double x_lo = x.empty() ? 0 : x.front(), x_hi = x.empty() ? 1 : x.back();
  const double x_span = x_hi > x_lo ? x_hi - x_lo : 1;
  const std::pair<double, double> y_range = value_range(series);
  const double y_lo = y_range.first, y_hi = y_range.second;  // (clang 14 cannot capture bindings)
  auto px = [&](double v) { return kLeft + (x.size() > 1 ? (v - x_lo) / x_span : 0.5) * plot_w; };
  auto py = [&](double v) { return kTop + (1 - (v - y_lo) / (y_hi - y_lo)) * plot_h; };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + coordinate(kWidth) +
                    "\" height=\"" + coordinate(kHeight) + "\" viewBox=\"0 0 " +
                    coordinate(kWidth) + " " + coordinate(kHeight) + "\" role=\"img\">\n";
  svg += "<title>" + xml_escaped(title) + "</title>\n";
  svg += "<text x=\"" + coordinate(kLeft) + "\" y=\"18\" font-size=\"14\" font-weight=\"bold\">" +
         xml_escaped(title) + "</text>\n";
  svg += "<rect x=\"" + coordinate(kLeft) + "\" y=\"" + coordinate(kTop) + "\" width=\"" +
         coordinate(plot_w) + "\" height=\"" + coordinate(plot_h) +
         "\" fill=\"none\" stroke=\"#999\"/>\n";
  // Axis labels: y at bottom, middle, top; x at both ends.
  for (double f : {0.0, 0.5, 1.0}) {
    const double v = y_lo + f * (y_hi - y_lo);
    svg += "<text x=\"" + coordinate(kLeft - 4) + "\" y=\"" + coordinate(py(v) + 4) +
           "\" font-size=\"11\" text-anchor=\"end\">" + number(v) + "</text>\n";
  }
  svg += "<text x=\"" + coordinate(kLeft) + "\" y=\"" + coordinate(kTop + plot_h + 14) +
         "\" font-size=\"11\">" + number(x_lo) + "</text>\n";
  svg += "<text x=\"" + coordinate(kLeft + plot_w) + "\" y=\"" + coordinate(kTop + plot_h + 14) +
         "\" font-size=\"11\" text-anchor=\"end\">" + number(x_hi) + "</text>\n";
  svg += "<text x=\"" + coordinate(kLeft + plot_w / 2) + "\" y=\"" +
         coordinate(kTop + plot_h + 14) +
         "\" font-size=\"11\" text-anchor=\"middle\">epoch</text>\n";

  double legend_x = kLeft, legend_y = kHeight - 24;  // legend rows under the x labels
  for (const ChartSeries& s : series) {
    const std::string dash = s.dashed ? " stroke-dasharray=\"5 3\"" : "";
    // Runs of finite values become polylines; a lone point becomes a dot.
    std::vector<std::pair<double, double>> run;
    auto flush = [&] {
      if (run.size() == 1)
        svg += "<circle cx=\"" + coordinate(run[0].first) + "\" cy=\"" + coordinate(run[0].second) +
               "\" r=\"2.5\" fill=\"" + s.color + "\"/>\n";
      if (run.size() > 1) {
        svg += "<polyline fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"1.8\"" + dash +
               " points=\"";
        for (const auto& [a, b] : run) svg += coordinate(a) + "," + coordinate(b) + " ";
        svg += "\"/>\n";
      }
      run.clear();
    };
    for (size_t i = 0; i < s.values.size() && i < x.size(); ++i) {
      if (std::isfinite(s.values[i]))
        run.emplace_back(px(x[i]), py(s.values[i]));
      else
        flush();
    }
    flush();
    const double legend_width = 30 + 6.5 * double(s.name.size());
    if (legend_x > kLeft && legend_x + legend_width > kWidth - kRight)
      legend_x = kLeft, legend_y += 14;  // wrap to a second row
    svg += "<line x1=\"" + coordinate(legend_x) + "\" y1=\"" + coordinate(legend_y - 4) +
           "\" x2=\"" + coordinate(legend_x + 16) + "\" y2=\"" + coordinate(legend_y - 4) +
           "\" stroke=\"" + s.color + "\" stroke-width=\"2\"" + dash + "/>\n";
    svg += "<text x=\"" + coordinate(legend_x + 20) + "\" y=\"" + coordinate(legend_y) +
           "\" font-size=\"11\">" + xml_escaped(s.name) + "</text>\n";
    legend_x += legend_width;
  }
  return svg + "</svg>\n";
}

namespace {

const char* timeline_color(const trace::Event& e) {
  auto is = [&](const char* prefix) { return e.name.rfind(prefix, 0) == 0; };
  if (is("forward ")) return "#1f77b4";
  if (is("backward ")) return "#ff7f0e";
  if (is("allreduce bucket ")) return "#2ca02c";
  if (is("syncbn ")) return "#9467bd";
  if (is("optimizer step")) return "#d62728";
  if (is("data wait")) return "#8c564b";
  return "#7f7f7f";
}

}  // namespace

std::string svg_step_timeline(const std::vector<std::vector<trace::Event>>& ranks) {
  const std::optional<trace::StepWindow> step =
      ranks.empty() ? std::nullopt : trace::last_step(ranks[0]);  // rank 0's
  if (!step) return "";
  const int64_t begin = step->begin_us, end = step->end_us;
  constexpr double kLane = 14, kLabel = 110, kPlot = 900;
  const double height = 24 + double(ranks.size()) * 3 * (kLane + 2) + 8 * double(ranks.size());
  const double scale = kPlot / double(std::max<int64_t>(end - begin, 1));
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                    coordinate(kLabel + kPlot + 10) + "\" height=\"" + coordinate(height) + "\">\n";
  svg += "<text x=\"4\" y=\"16\" font-size=\"13\" font-weight=\"bold\">One traced step, " +
         number(double(end - begin) / 1e3) + " ms (hover a range for its name)</text>\n";
  double y = 24;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    for (trace::Track track :
         {trace::Track::compute, trace::Track::communication, trace::Track::loader}) {
      svg += "<text x=\"4\" y=\"" + coordinate(y + kLane - 3) + "\" font-size=\"11\">rank " +
             std::to_string(rank) + " " + trace::track_name(track) + "</text>\n";
      for (const trace::Event& e : ranks[rank]) {
        if (e.track != track || e.end_us <= begin || e.begin_us >= end) continue;
        const double x0 = kLabel + double(std::max(e.begin_us, begin) - begin) * scale;
        const double x1 = kLabel + double(std::min(e.end_us, end) - begin) * scale;
        svg += "<rect x=\"" + coordinate(x0) + "\" y=\"" + coordinate(y) + "\" width=\"" +
               coordinate(std::max(x1 - x0, 0.5)) + "\" height=\"" + coordinate(kLane) +
               "\" fill=\"" + timeline_color(e) + "\"><title>" + xml_escaped(e.name) + ", " +
               number(double(e.end_us - e.begin_us) / 1e3) + " ms</title></rect>\n";
      }
      y += kLane + 2;
    }
    y += 8;
  }
  return svg + "</svg>\n";
}

namespace {

// RFC 4648 base64, for pictures embedded as data URIs.
std::string base64(std::string_view bytes) {
  static const char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string text;
  text.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    auto byte = [&](size_t k) { return uint32_t(uint8_t(bytes[i + k])); };
    uint32_t group = byte(0) << 16;
    if (n > 1) group |= byte(1) << 8;
    if (n > 2) group |= byte(2);
    for (size_t k = 0; k < 4; ++k) text += k <= n ? kDigits[(group >> (18 - 6 * k)) & 63] : '=';
  }
  return text;
}

// The run's pictures that exist in `dir`, each an <img> holding its bytes.
std::string embedded_pictures(const std::string& dir) {
  std::string html;
  if (dir.empty()) return html;
  for (const std::string& name : run_picture_names()) {
    const data::FileContents file =
        data::read_regular_file((std::filesystem::path(dir) / name).string());
    if (file.kind != data::FileContents::regular) continue;
    const std::string type = name.ends_with(".png") ? "image/png" : "image/jpeg";
    html += "<figure><img alt=\"" + name + "\" src=\"data:" + type + ";base64," +
            base64(file.bytes) + "\"><figcaption>" + name + "</figcaption></figure>\n";
  }
  return html.empty() ? html : "<h2>Pictures</h2>\n<div>\n" + html + "</div>\n";
}

// The index in `history` of the best validated epoch (highest fitness; the later on ties, as
// YOLOv5 saves best.pt on ties); nullopt when none was validated.
std::optional<size_t> best_epoch(const std::vector<EpochMetrics>& history) {
  std::optional<size_t> best;
  for (size_t i = 0; i < history.size(); ++i)
    if (history[i].validated && (!best || history[i].fitness >= history[*best].fitness)) best = i;
  return best;
}

std::string cell(const std::string& text) { return "<td>" + xml_escaped(text) + "</td>"; }

// The last validation as YOLOv5's table: an "all" row, then a row per class.
std::string class_table(const ValidationReport& report, const std::vector<std::string>& names) {
  const DetectionMetrics& m = report.metrics;
  std::string html = "<h2>Last validation (epoch " + std::to_string(report.epoch) +
                     ")</h2>\n<table><tr><th>Class</th><th>Images</th><th>Instances</th><th>P</th>"
                     "<th>R</th><th>mAP50</th><th>mAP50-95</th></tr>\n";
  html += "<tr>" + cell("all") + cell(std::to_string(report.images)) +
          cell(std::to_string(report.labels)) + cell(number(m.mean_precision)) +
          cell(number(m.mean_recall)) + cell(number(m.map50)) + cell(number(m.map50_95)) +
          "</tr>\n";
  for (const ClassMetrics& c : m.classes) {
    const std::string name = c.class_id >= 0 && size_t(c.class_id) < names.size()
                                 ? names[size_t(c.class_id)]
                                 : std::to_string(c.class_id);
    html += "<tr>" + cell(name) + cell(std::to_string(report.images)) +
            cell(std::to_string(c.labels)) + cell(number(c.precision)) + cell(number(c.recall)) +
            cell(number(c.ap50)) + cell(number(c.ap50_95)) + "</tr>\n";
  }
  return html + "</table>\n";
}

// The configuration JSON as a two-column table, nested objects flattened ("hyp.lr0"); text
// that is not JSON is shown as it is.
std::string config_table(const std::string& config_json) {
  const nlohmann::json config = nlohmann::json::parse(config_json, nullptr, false);
  if (config.is_discarded() || !config.is_object())
    return "<pre>" + xml_escaped(config_json) + "</pre>\n";
  std::string rows;
  std::function<void(const std::string&, const nlohmann::json&)> add =
      [&](const std::string& key, const nlohmann::json& value) {
        if (value.is_object()) {
          for (const auto& [name, inner] : value.items())
            add(key.empty() ? name : key + "." + name, inner);
          return;
        }
        rows += "<tr><th>" + xml_escaped(key) + "</th>" +
                cell(value.is_string() ? value.get<std::string>() : value.dump()) + "</tr>\n";
      };
  add("", config);
  return "<table class=\"config\">\n" + rows + "</table>\n";
}

}  // namespace

std::vector<ReportChart> report_charts(const std::vector<EpochMetrics>& history) {
  auto column = [&](double EpochMetrics::*field, bool validated_only = false) {
    std::vector<double> values;
    for (const EpochMetrics& m : history)
      values.push_back(validated_only && !m.validated ? std::nan("") : m.*field);
    return values;
  };
  const char* blue = "#1f77b4";
  const char* orange = "#ff7f0e";
  const char* green = "#2ca02c";
  const char* red = "#d62728";
  return {{"Losses",
           {{"train box", blue, column(&EpochMetrics::train_box)},
            {"train obj", orange, column(&EpochMetrics::train_obj)},
            {"train cls", green, column(&EpochMetrics::train_cls)},
            {"val box", blue, column(&EpochMetrics::val_box, true), true},
            {"val obj", orange, column(&EpochMetrics::val_obj, true), true},
            {"val cls", green, column(&EpochMetrics::val_cls, true), true}}},
          {"Validation (EMA weights)",
           {{"mAP50", blue, column(&EpochMetrics::map50, true)},
            {"mAP50-95", orange, column(&EpochMetrics::map50_95, true)},
            {"precision", green, column(&EpochMetrics::precision, true)},
            {"recall", red, column(&EpochMetrics::recall, true)}}},
          {"Learning rates",
           {{"lr0 (biases)", blue, column(&EpochMetrics::lr0)},
            {"lr1 (weights)", orange, column(&EpochMetrics::lr1)},
            {"lr2 (BN weights)", green, column(&EpochMetrics::lr2), true}}},
          {"Step time (s per batch)", {{"s/batch", blue, column(&EpochMetrics::step_seconds)}}}};
}

std::string render_report_html(const ReportContent& content) {
  const std::vector<EpochMetrics>& history = content.history;
  std::vector<double> x;
  for (const EpochMetrics& m : history) x.push_back(m.epoch);
  std::string charts;
  for (const ReportChart& chart : report_charts(history))
    charts += svg_line_chart(chart.title, x, chart.series);

  const std::optional<size_t> best = best_epoch(history);
  std::string table =
      "<table><tr><th>epoch</th><th>box</th><th>obj</th><th>cls</th><th>P</th><th>R</th>"
      "<th>mAP50</th><th>mAP50-95</th><th>val box</th><th>val obj</th><th>val cls</th>"
      "<th>lr0</th><th>lr1</th><th>lr2</th><th>s/batch</th></tr>\n";
  for (size_t i = 0; i < history.size(); ++i) {
    const EpochMetrics& m = history[i];
    table += std::string(best == i ? "<tr class=\"best\">" : "<tr>") + "<td>" +
             std::to_string(m.epoch) + "</td>";
    for (double v : {m.train_box, m.train_obj, m.train_cls}) table += "<td>" + number(v) + "</td>";
    for (double v : {m.precision, m.recall, m.map50, m.map50_95, m.val_box, m.val_obj, m.val_cls})
      table += "<td>" + (m.validated ? number(v) : std::string("-")) + "</td>";
    for (double v : {m.lr0, m.lr1, m.lr2, m.step_seconds}) table += "<td>" + number(v) + "</td>";
    table += "</tr>\n";
  }
  table += "</table>\n";
  const std::string best_line =
      best ? "<p class=\"best\">Best epoch " + std::to_string(history[*best].epoch) + ": mAP50 " +
                 number(history[*best].map50) + ", mAP50-95 " + number(history[*best].map50_95) +
                 " (fitness " + number(history[*best].fitness) +
                 "; its weights are weights/best.safetensors).</p>\n"
           : std::string();
  const std::string timeline = svg_step_timeline(content.traced_ranks);

  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" +
         xml_escaped(content.title) +
         "</title>\n<style>body{font-family:sans-serif;margin:1.5em}"
         "svg{margin:0 1em 1em 0;border:1px solid #ddd}"
         "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;"
         "padding:2px 6px;text-align:right}table.config th,table.config td{text-align:left}"
         "tr.best td{background:#fff3c4;font-weight:bold}p.best{background:#fff3c4;"
         "padding:4px}figure{display:inline-block;margin:0 1em 1em 0}"
         "img{max-width:900px;border:1px solid #ddd}pre{background:#f6f6f6;padding:1em;"
         "white-space:pre-wrap}</style>\n</head><body>\n<h1>" +
         xml_escaped(content.title) + "</h1>\n<p>" + std::to_string(history.size()) +
         " epoch(s). Dashed: validation losses. Validation skipped (--no-val) shows as "
         "gaps.</p>\n" +
         best_line + "<div>\n" + charts + "</div>\n" + embedded_pictures(content.pictures_dir) +
         (content.last_validation ? class_table(*content.last_validation, content.names)
                                  : std::string()) +
         (timeline.empty() ? std::string() : "<h2>A traced step (--trace)</h2>\n" + timeline) +
         "<h2>Epochs</h2>\n" + table + "<h2>Configuration</h2>\n" +
         config_table(content.config_json) + "</body></html>\n";
}

void write_report_html(const std::string& path, const ReportContent& content) {
  const std::string page = render_report_html(content);
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(page.data()), page.size());
  write_file_atomically(path, {bytes});
}

TrainCallbacks report_writer() {
  struct State {
    std::string path;
    ReportContent content;
  };
  auto state = std::make_shared<State>();
  TrainCallbacks callbacks;
  callbacks.on_train_start = [state](const TrainStartInfo& run) {
    state->path = (std::filesystem::path(run.run_dir) / "report.html").string();
    state->content = {.title = "bareyolo train: " + run.run_dir,
                      .config_json = run.config_json,
                      .history = run.history,
                      .names = run.names,
                      .pictures_dir = run.run_dir};
  };
  callbacks.on_val_end = [state](const ValidationReport& report) {
    state->content.last_validation = report;
  };
  callbacks.on_fit_epoch_end = [state](const EpochMetrics& m) {
    state->content.history.push_back(m);
    write_report_html(state->path, state->content);
  };
  // At the end: the pictures drawn at the end, and with --trace a traced step of each rank.
  callbacks.on_train_end = [state](const TrainEndInfo& end) {
    if (!end.trace.empty()) {
      const data::FileContents trace = data::read_regular_file(end.trace);
      if (trace.kind == data::FileContents::regular)
        state->content.traced_ranks = trace::events_from_chrome_json(trace.bytes);
    }
    write_report_html(state->path, state->content);
  };
  return callbacks;
}

std::string validation_table(const DetectionMetrics& metrics, int64_t images, int64_t labels,
                             const std::vector<std::string>& names) {
  char line[256];
  std::snprintf(line, sizeof line, "%22s%11s%11s%11s%11s%11s%11s\n", "Class", "Images", "Instances",
                "P", "R", "mAP50", "mAP50-95");
  std::string text = line;
  std::snprintf(line, sizeof line, "%22s%11lld%11lld%11.3g%11.3g%11.3g%11.3g\n", "all",
                static_cast<long long>(images), static_cast<long long>(labels),
                metrics.mean_precision, metrics.mean_recall, metrics.map50, metrics.map50_95);
  text += line;
  for (const ClassMetrics& c : metrics.classes) {
    const std::string name = c.class_id >= 0 && size_t(c.class_id) < names.size()
                                 ? names[size_t(c.class_id)]
                                 : std::to_string(c.class_id);
    std::snprintf(line, sizeof line, "%22s%11lld%11lld%11.3g%11.3g%11.3g%11.3g\n", name.c_str(),
                  static_cast<long long>(images), static_cast<long long>(c.labels), c.precision,
                  c.recall, c.ap50, c.ap50_95);
    text += line;
  }
  return text;
}

}  // namespace bareyolo::models
