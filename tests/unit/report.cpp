// tests/unit/report.cpp — what a run shows: results.csv with YOLOv5's columns, the JSON-lines
// log, report.html (self-contained inline SVG), the validation table and the progress bar.
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <tuple>

#include "data/image.h"
#include "models/train/callbacks.h"
#include "models/train/outputs/console.h"
#include "models/train/outputs/progress.h"
#include "models/train/outputs/report.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

models::EpochMetrics epoch(int e, double map50) {
  return {.epoch = e,
          .train_box = 0.1 / (e + 1),
          .train_obj = 0.05,
          .train_cls = 0.02,
          .precision = 0.5,
          .recall = 0.4,
          .map50 = map50,
          .map50_95 = map50 / 2,
          .val_box = 0.09,
          .val_obj = 0.04,
          .val_cls = 0.01,
          .lr0 = 0.09,
          .lr1 = 0.001,
          .lr2 = 0.001,
          .fitness = map50 / 2,
          .validated = true,
          .epoch_seconds = 3,
          .train_seconds = 2,
          .val_seconds = 0.75,
          .checkpoint_seconds = 0.125,
          .step_seconds = 0.25,
          .data_wait_per_rank = {0.125, 0.5},
          .data_wait = 0.5};
}

// An epoch whose every number differs from the others, in the order of report.html's epoch
// table (box, obj, cls, P, R, mAP50, mAP50-95, val box, val obj, val cls, lr0, lr1, lr2,
// s/batch): e + 0.01, e + 0.02, ... e + 0.14; fitness e + 0.15.
models::EpochMetrics distinct_epoch(int e) {
  using M = models::EpochMetrics;
  M m{.epoch = e, .validated = true};
  double M::*const fields[] = {&M::train_box, &M::train_obj,    &M::train_cls, &M::precision,
                               &M::recall,    &M::map50,        &M::map50_95,  &M::val_box,
                               &M::val_obj,   &M::val_cls,      &M::lr0,       &M::lr1,
                               &M::lr2,       &M::step_seconds, &M::fitness};
  for (size_t k = 0; k < std::size(fields); ++k) m.*fields[k] = e + 0.01 * double(k + 1);
  return m;
}

// The (x, y) points of the chart's polylines, each polyline's in order.
std::vector<std::vector<std::pair<double, double>>> polylines(const std::string& svg) {
  static const std::regex points(R"re(<polyline[^>]* points="([^"]*)")re");
  std::vector<std::vector<std::pair<double, double>>> lines;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), points); it != std::sregex_iterator();
       ++it) {
    std::istringstream text((*it)[1].str());
    lines.emplace_back();
    double x = 0, y = 0;
    char comma = 0;
    while (text >> x >> comma >> y) lines.back().emplace_back(x, y);
  }
  return lines;
}

}  // namespace

TEST_CASE("results.csv has YOLOv5's 14 columns, then x/data_wait, and one row per epoch") {
  const std::string header = models::results_csv_header();
  CHECK(header.rfind("epoch,train/box_loss,train/obj_loss,train/cls_loss,metrics/precision,", 0) ==
        0);
  CHECK(count(header, ",") == 14);
  CHECK(header.find("val/cls_loss,x/lr0,x/lr1,x/lr2,x/data_wait\n") != std::string::npos);
  // Every column a different value, one with 6 significant digits: each lands in its column.
  models::EpochMetrics m = epoch(3, 0.25);
  m.train_cls = 0.03, m.lr0 = 0.00912345, m.lr2 = 0.002;
  CHECK(models::results_csv_row(m) ==
        "3,0.025,0.05,0.03,0.5,0.4,0.25,0.125,0.09,0.04,0.01,0.00912345,0.001,0.002,0.5\n");
}

TEST_CASE("the loggers rewrite a resumed run's history, then append each epoch") {
  TempDir dir;
  const fs::path csv = dir.path() / "results.csv", jsonl = dir.path() / "results.jsonl";
  write_text(csv, "stale rows of an epoch that never reached its checkpoint\n");
  models::TrainCallbacks csv_log = models::csv_logger(csv.string());
  models::TrainCallbacks json_log = models::jsonl_logger(jsonl.string());
  models::TrainStartInfo start;
  start.run_dir = dir.path().string();
  start.start_epoch = 1;
  start.epochs = 3;
  start.history = {epoch(0, 0.1)};
  csv_log.on_train_start(start);
  json_log.on_train_start(start);
  csv_log.on_fit_epoch_end(epoch(1, 0.2));
  json_log.on_fit_epoch_end(epoch(1, 0.2));
  CHECK(read_text(csv) == models::results_csv_header() + models::results_csv_row(epoch(0, 0.1)) +
                              models::results_csv_row(epoch(1, 0.2)));
  std::ifstream lines(jsonl);
  std::string line;
  std::vector<models::EpochMetrics> parsed;
  while (std::getline(lines, line)) parsed.push_back(models::parse_epoch_metrics_json(line));
  REQUIRE(parsed.size() == 2);
  CHECK(parsed[1].map50 == 0.2);
  CHECK(parsed[1].step_seconds == 0.25);
  CHECK(parsed[1].epoch_seconds == 3);  // the epoch's seconds, split
  CHECK(parsed[1].train_seconds == 2);
  CHECK(parsed[1].val_seconds == 0.75);
  CHECK(parsed[1].checkpoint_seconds == 0.125);
  CHECK(parsed[1].data_wait == 0.5);
  CHECK(parsed[1].data_wait_per_rank == std::vector<double>{0.125, 0.5});
  CHECK(parsed[0].validated);
  CHECK_THROWS_WITH_AS(models::parse_epoch_metrics_json(R"({"epoch": 1})"),
                       doctest::Contains("train/box_loss"), std::invalid_argument);
  // A record from before the epoch's seconds were split: they were the training's alone.
  nlohmann::json old_record = nlohmann::json::parse(models::epoch_metrics_json(epoch(2, 0.3)));
  old_record.erase("train_seconds");
  CHECK(models::parse_epoch_metrics_json(old_record.dump()).train_seconds == 3);
}

TEST_CASE("svg charts draw one polyline per series and leave gaps for skipped values") {
  const std::vector<double> x = {0, 1, 2, 3};
  const std::string svg = models::svg_line_chart(
      "t<1>", x,
      {{"a", "#111", {1, 2, 3, 4}},
       {"b", "#222", {1, std::nan(""), 3, 4}},  // a gap: one dot and one 2-point line
       {"c", "#333", {5, 5, 5, 5}, true}});     // flat: still drawn inside the plot
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(count(svg, "<polyline") == 3);
  CHECK(count(svg, "<circle") == 1);
  CHECK(count(svg, "stroke-dasharray") == 2);          // the series and its legend
  CHECK(svg.find("t&lt;1&gt;") != std::string::npos);  // escaped
  CHECK(svg.find("nan") == std::string::npos);
}

TEST_CASE("svg charts: a larger value is drawn higher, a later epoch further right, in the plot") {
  static const std::regex frame(
      R"re(<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)")re");
  auto plot_area = [](const std::string& svg) {
    std::smatch m;
    REQUIRE(std::regex_search(svg, m, frame));
    return std::array<double, 4>{std::stod(m[1]), std::stod(m[2]),
                                 std::stod(m[1]) + std::stod(m[3]),
                                 std::stod(m[2]) + std::stod(m[4])};  // left, top, right, bottom
  };
  const std::string rising = models::svg_line_chart("r", {0, 1, 2}, {{"a", "#111", {1, 2, 4}}});
  const auto [left, top, right, bottom] = plot_area(rising);
  const auto lines = polylines(rising);
  REQUIRE(lines.size() == 1);
  REQUIRE(lines[0].size() == 3);
  const std::vector<std::pair<double, double>> points = lines[0];
  auto near = [](double a, double b) { return std::abs(a - b) <= 0.051; };  // "%.1f" px
  CHECK(near(points[0].first, left));  // x from the first epoch to the last
  CHECK(near(points[2].first, right));
  CHECK(near(points[0].second, bottom));  // y from the least value to the most
  CHECK(near(points[2].second, top));
  CHECK(near(points[1].first, (left + right) / 2));
  CHECK(near(points[1].second, bottom - (bottom - top) / 3));
  // A series flat at zero sits mid-plot; one with no value draws nothing and no NaN label.
  const std::string zero = models::svg_line_chart("z", {0, 1}, {{"z", "#111", {0, 0}}});
  const auto flat = polylines(zero);
  REQUIRE(flat.size() == 1);
  CHECK(near(flat[0][0].second, (top + bottom) / 2));
  CHECK(zero.find("nan") == std::string::npos);
  const std::string empty =
      models::svg_line_chart("n", {0, 1}, {{"n", "#111", {std::nan(""), std::nan("")}}});
  CHECK(polylines(empty).empty());
  CHECK(empty.find("nan") == std::string::npos);
}

TEST_CASE("report charts: each series shows its own field, validation's with gaps") {
  std::vector<models::EpochMetrics> history = {distinct_epoch(0), distinct_epoch(1),
                                               distinct_epoch(2)};
  history[1].validated = false;
  using M = models::EpochMetrics;
  const std::vector<std::tuple<std::string, double M::*, bool>> expected = {
      {"train box", &M::train_box, false},  {"train obj", &M::train_obj, false},
      {"train cls", &M::train_cls, false},  {"val box", &M::val_box, true},
      {"val obj", &M::val_obj, true},       {"val cls", &M::val_cls, true},
      {"mAP50", &M::map50, true},           {"mAP50-95", &M::map50_95, true},
      {"precision", &M::precision, true},   {"recall", &M::recall, true},
      {"lr0 (biases)", &M::lr0, false},     {"lr1 (weights)", &M::lr1, false},
      {"lr2 (BN weights)", &M::lr2, false}, {"s/batch", &M::step_seconds, false}};
  std::map<std::string, std::vector<double>> shown;
  for (const models::ReportChart& chart : models::report_charts(history))
    for (const models::ChartSeries& series : chart.series)
      CHECK_MESSAGE(shown.emplace(series.name, series.values).second, series.name);
  CHECK(shown.size() == expected.size());
  for (const auto& [name, field, validation] : expected) {
    const std::string series = name;  // (clang 14 cannot capture bindings in INFO)
    INFO(series);
    REQUIRE(shown.count(name) == 1);
    const std::vector<double>& values = shown[name];
    REQUIRE(values.size() == 3);
    for (size_t i = 0; i < 3; ++i) {
      if (validation && !history[i].validated)
        CHECK(std::isnan(values[i]));
      else
        CHECK(values[i] == history[i].*field);
    }
  }
}

TEST_CASE("report.html's epoch table: every column its field, the later of tied epochs best") {
  std::vector<models::EpochMetrics> history = {distinct_epoch(0), distinct_epoch(1)};
  history[1].fitness = history[0].fitness;  // a tie: YOLOv5 saves best.pt again
  const std::string html = models::render_report_html({.history = history});
  CHECK(html.find("<tr><td>0</td><td>0.01</td><td>0.02</td><td>0.03</td><td>0.04</td><td>0.05</td>"
                  "<td>0.06</td><td>0.07</td><td>0.08</td><td>0.09</td><td>0.1</td><td>0.11</td>"
                  "<td>0.12</td><td>0.13</td><td>0.14</td></tr>") != std::string::npos);
  CHECK(html.find("<tr class=\"best\"><td>1</td><td>1.01</td>") != std::string::npos);
  CHECK(html.find("Best epoch 1: mAP50 1.06, mAP50-95 1.07 (fitness 0.15;") != std::string::npos);
}

TEST_CASE("report_writer rewrites report.html after each epoch, with the trace at the end") {
  TempDir dir;
  models::TrainCallbacks writer = models::report_writer();
  models::TrainStartInfo start;
  start.run_dir = dir.path().string();
  start.history = {epoch(0, 0.1)};
  writer.on_train_start(start);
  writer.on_fit_epoch_end(epoch(1, 0.2));
  const fs::path page = dir.path() / "report.html";
  CHECK(read_text(page).find("<p>2 epoch(s).") != std::string::npos);  // a resume's and this one
  writer.on_fit_epoch_end(epoch(2, 0.3));
  CHECK(read_text(page).find("<p>3 epoch(s).") != std::string::npos);
  auto step = [](int64_t begin) {
    return trace::Event{.name = "optimizer step",
                        .track = trace::Track::compute,
                        .begin_us = begin,
                        .end_us = begin + 100,
                        .op = "",
                        .bytes = 0};
  };
  write_text(dir.path() / "trace.json", trace::chrome_trace_json({{step(0), step(400)}}));
  CHECK(read_text(page).find("A traced step") == std::string::npos);
  models::TrainEndInfo end;
  end.trace = (dir.path() / "trace.json").string();
  writer.on_train_end(end);
  CHECK(read_text(page).find("<h2>A traced step (--trace)</h2>") != std::string::npos);
}

TEST_CASE("report.html: pictures as RFC 4648 base64 data URIs, each with its type") {
  TempDir dir;
  // RFC 4648's test vectors: one, two and three bytes in the last group.
  write_text(dir.path() / "results.png", "foobar");
  write_text(dir.path() / "labels.jpg", "f");
  write_text(dir.path() / "confusion_matrix.png", "fooba");
  const std::string html =
      models::render_report_html({.history = {epoch(0, 0.1)}, .pictures_dir = dir.path().string()});
  CHECK(count(html, "<img ") == 3);
  CHECK(html.find("src=\"data:image/png;base64,Zm9vYmFy\"") != std::string::npos);
  CHECK(html.find("src=\"data:image/jpeg;base64,Zg==\"") != std::string::npos);
  CHECK(html.find("src=\"data:image/png;base64,Zm9vYmE=\"") != std::string::npos);
}

TEST_CASE("report.html is one self-contained page with the four charts and every epoch") {
  TempDir dir;
  const fs::path path = dir.path() / "report.html";
  std::vector<models::EpochMetrics> history = {epoch(0, 0.1), epoch(1, 0.3), epoch(2, 0.2)};
  history[1].validated = false;  // --no-val: a gap in the validation charts, '-' in the table
  models::write_report_html(path.string(), {.title = "run <x>",
                                            .config_json = R"({"epochs": 3, "hyp": {"lr0": 0.01}})",
                                            .history = history});
  const std::string html = read_text(path);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(count(html, "<svg") == 4);
  for (const char* title : {"Losses", "Validation", "Learning rates", "Step time"})
    CHECK(html.find(title) != std::string::npos);
  // Epoch 1 has the highest fitness but was not validated: epoch 2 is the best one.
  CHECK(count(html, "<tr><td>") == 2);
  CHECK(html.find("<tr class=\"best\"><td>2</td>") != std::string::npos);
  CHECK(html.find("Best epoch 2: mAP50 0.2,") != std::string::npos);
  CHECK(html.find("<td>-</td>") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);  // no pictures in this folder, none linked
  CHECK(html.find("run &lt;x&gt;") != std::string::npos);
  CHECK(html.find("<tr><th>epochs</th><td>3</td></tr>") != std::string::npos);
  CHECK(html.find("<tr><th>hyp.lr0</th><td>0.01</td></tr>") != std::string::npos);
}

// A validation whose every number differs: the means 0.11 .. 0.44, the class's 0.55 .. 0.88.
models::DetectionMetrics distinct_metrics() {
  models::DetectionMetrics metrics;
  metrics.mean_precision = 0.11, metrics.mean_recall = 0.22;
  metrics.map50 = 0.33, metrics.map50_95 = 0.44;
  metrics.classes = {{.class_id = 1,
                      .labels = 7,
                      .precision = 0.55,
                      .recall = 0.66,
                      .ap50 = 0.77,
                      .ap50_95 = 0.88},
                     {.class_id = 5, .labels = 2}};
  return metrics;
}

TEST_CASE("report.html embeds the run's pictures and the last validation's classes") {
  TempDir dir;
  data::write_image((dir.path() / "results.png").string(), data::Image(4, 3, 200));
  const models::ValidationReport report{
      .epoch = 0, .metrics = distinct_metrics(), .images = 5, .labels = 9};
  const std::string html = models::render_report_html({.history = {epoch(0, 0.1)},
                                                       .last_validation = report,
                                                       .names = {"circle", "square"},
                                                       .pictures_dir = dir.path().string()});
  CHECK(count(html, "<img ") == 1);
  // The bytes as base64: the PNG signature \x89PNG\r\n\x1a\n encodes to iVBORw0KGgo.
  CHECK(html.find("src=\"data:image/png;base64,iVBORw0KGgo") != std::string::npos);
  CHECK(html.find("<tr><td>all</td><td>5</td><td>9</td><td>0.11</td><td>0.22</td><td>0.33</td>"
                  "<td>0.44</td></tr>") != std::string::npos);
  CHECK(html.find("<tr><td>square</td><td>5</td><td>7</td><td>0.55</td><td>0.66</td><td>0.77</td>"
                  "<td>0.88</td></tr>") != std::string::npos);
  CHECK(html.find("<tr><td>5</td><td>5</td><td>2</td>") != std::string::npos);  // no name: id
}

TEST_CASE("the validation table has an all row and a named row per class") {
  const std::string table =
      models::validation_table(distinct_metrics(), 10, 9, {"circle", "square"});
  std::istringstream lines(table);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    rows.emplace_back(std::istream_iterator<std::string>(words),
                      std::istream_iterator<std::string>());
  }
  using Row = std::vector<std::string>;
  REQUIRE(rows.size() == 4);
  CHECK(rows[0] == Row{"Class", "Images", "Instances", "P", "R", "mAP50", "mAP50-95"});
  CHECK(rows[1] == Row{"all", "10", "9", "0.11", "0.22", "0.33", "0.44"});
  CHECK(rows[2] == Row{"square", "10", "7", "0.55", "0.66", "0.77", "0.88"});
  CHECK(rows[3] == Row{"5", "10", "2", "0", "0", "0", "0"});           // no name: the id
  CHECK(table.find("\n                     5") != std::string::npos);  // right-aligned in 22
}

TEST_CASE("the progress bar prints plain lines per tenth of an epoch when not on a terminal") {
  TempDir dir;
  const fs::path log = dir.path() / "log.txt";
  std::FILE* out = std::fopen(log.c_str(), "w");
  REQUIRE(out != nullptr);
  {
    models::ProgressBar bar(out, /*interactive=*/false, "2/5", 40, /*start=*/10);
    for (int done = 11; done <= 40; ++done) bar.update(done, {0.1, 0.2, 0.3, 17, 64});
    bar.finish();
  }
  std::fclose(out);
  const std::string text = read_text(log);
  CHECK(count(text, "\n") == 9);  // one line per decile reached: 11/40 is decile 2, then 3 .. 10
  CHECK(text.find("2/5") != std::string::npos);
  CHECK(text.find("40/40") != std::string::npos);
  CHECK(text.find("100%|##########|") != std::string::npos);
  // 11/40: 27 %, two full cells and 6 eighths of the third; the fields in the header's order.
  const std::string first = text.substr(0, text.find('\n'));
  CHECK(first.find(" 27%|##6       | 11/40 [") != std::string::npos);
  std::istringstream words(first);
  std::vector<std::string> fields(std::istream_iterator<std::string>(words), {});
  REQUIRE(fields.size() > 7);
  CHECK(std::vector<std::string>(fields.begin() + 2, fields.begin() + 7) ==
        std::vector<std::string>{"0.1", "0.2", "0.3", "17", "64"});  // after epoch and RSS
  CHECK(text.find('\r') == std::string::npos);
  CHECK(models::ProgressBar::header().find("box_loss") != std::string::npos);
  CHECK(models::resident_memory_bytes() > 0);
}

TEST_CASE("the progress bar's callbacks show each batch's box, obj and cls losses in order") {
  TempDir dir;
  const fs::path log = dir.path() / "log.txt";
  std::FILE* out = std::fopen(log.c_str(), "w");
  REQUIRE(out != nullptr);
  models::TrainCallbacks bar = models::progress_bar(out);
  bar.on_train_epoch_start({.epoch = 1, .epochs = 5, .batches = 2, .batches_done = 0});
  models::BatchEndInfo batch{.batches_done = 2, .instances = 17, .image_size = 64};
  batch.loss_mean[0] = 0.1, batch.loss_mean[1] = 0.2, batch.loss_mean[2] = 0.3;
  bar.on_train_batch_end(batch);
  bar.on_epoch_end(1);
  std::fclose(out);
  std::istringstream lines(read_text(log));
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  CHECK(header == models::ProgressBar::header());
  std::istringstream words(row);
  std::vector<std::string> fields(std::istream_iterator<std::string>(words), {});
  REQUIRE(fields.size() > 7);
  CHECK(
      std::vector<std::string>{fields[0], fields[2], fields[3], fields[4], fields[5], fields[6]} ==
      std::vector<std::string>{"2/5", "0.1", "0.2", "0.3", "17", "64"});
}

TEST_CASE("the progress bar's clock: minutes and seconds, hours from an hour on") {
  CHECK(models::clock_text(0) == "00:00");
  CHECK(models::clock_text(59.4) == "00:59");
  CHECK(models::clock_text(3599) == "59:59");
  CHECK(models::clock_text(3600) == "1:00:00");
  CHECK(models::clock_text(3725) == "1:02:05");
  CHECK(models::clock_text(90061) == "25:01:01");
  CHECK(models::clock_text(-5) == "00:00");
}

TEST_CASE("the console's lines: each number its field, the ranks' waits, an early stop") {
  std::vector<std::string> lines;
  models::TrainCallbacks console =
      models::console_logger([&](const std::string& line) { lines.push_back(line); });
  models::TrainStartInfo start;
  start.epochs = 3;
  console.on_train_start(start);
  models::EpochMetrics m = distinct_epoch(1);
  m.data_wait_per_rank = {0.25, 0.5}, m.data_wait = 0.5;
  m.train_seconds = 2, m.val_seconds = 0.7, m.checkpoint_seconds = 0.4;
  console.on_fit_epoch_end(m);
  REQUIRE(lines.size() == 2);
  CHECK(lines[1].rfind("epoch 2/3  box 1.01  obj 1.02  cls 1.03  mAP50 1.06  mAP50-95 1.07  "
                       "data_wait 0.50 (ranks 0.25 0.50)  train 2.0 s  val 0.7 s  checkpoint 0.4 s",
                       0) == 0);
  models::TrainEndInfo end;
  end.finished = true, end.stopped_early = true, end.patience = 5, end.best_epoch = 1;
  console.on_train_end(end);
  REQUIRE(lines.size() == 3);
  CHECK(lines[2] == "stopping early: no improvement in the last 5 validations (best at epoch 2)");
}

TEST_CASE("on a terminal the bar redraws in place and ends its line once") {
  TempDir dir;
  const fs::path log = dir.path() / "tty.txt";
  std::FILE* out = std::fopen(log.c_str(), "w");
  REQUIRE(out != nullptr);
  {
    models::ProgressBar bar(out, /*interactive=*/true, "1/1", 3);
    bar.update(1, {});
    bar.update(3, {});  // the last batch is always drawn
    bar.finish();
  }
  std::fclose(out);
  const std::string text = read_text(log);
  CHECK(count(text, "\r") == 2);
  CHECK(count(text, "\n") == 1);
  CHECK(text.find("3/3") != std::string::npos);
}

TEST_CASE("report: a traced step drawn per rank, rank 0's last optimizer step as the window") {
  using bareyolo::trace::Event;
  using bareyolo::trace::Track;
  auto range = [](const char* name, Track track, int64_t begin, int64_t end) {
    return Event{
        .name = name, .track = track, .begin_us = begin, .end_us = end, .op = "", .bytes = 0};
  };
  const std::vector<Event> rank0 = {range("optimizer step", Track::compute, 0, 100),
                                    range("backward model.3", Track::compute, 200, 300),
                                    range("allreduce bucket 0", Track::communication, 250, 400),
                                    range("optimizer step", Track::compute, 400, 500)};
  const std::vector<Event> rank1 = {range("data wait", Track::loader, 120, 150),
                                    range("backward model.3", Track::compute, 210, 320)};
  const std::string svg = models::svg_step_timeline({rank0, rank1});
  CHECK(svg.find("One traced step, 0.4 ms") != std::string::npos);  // from 100 to 500
  CHECK(svg.find("rank 1 loader") != std::string::npos);
  CHECK(svg.find("<title>allreduce bucket 0, 0.15 ms</title>") != std::string::npos);
  CHECK(svg.find("<title>data wait, 0.03 ms</title>") != std::string::npos);
  // The step before the window is not drawn; the last one is.
  size_t rects = 0;
  for (size_t at = svg.find("<rect"); at != std::string::npos; at = svg.find("<rect", at + 1))
    ++rects;
  CHECK(rects == 5);
  CHECK(models::svg_step_timeline({}).empty());
}
