// tools/bareyolo/trace_command.cpp — see trace_command.h.
#include "tools/bareyolo/trace_command.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>

#include "data/regular_file.h"
#include "engine/atomic_file.h"
#include "engine/distributed/comm/flight_summary.h"
#include "engine/trace_analysis.h"
#include "engine/trace_svg.h"

namespace bareyolo {

namespace {

std::string trace_file, svg_file;

std::string bytes_text(double bytes) {
  char text[32];
  if (bytes >= 1e6)
    std::snprintf(text, sizeof text, "%.2f MB", bytes / 1e6);
  else if (bytes >= 1e3)
    std::snprintf(text, sizeof text, "%.1f KB", bytes / 1e3);
  else
    std::snprintf(text, sizeof text, "%.0f B", bytes);
  return text;
}

void print_rank(size_t rank, const std::vector<trace::Event>& events) {
  const trace::StepAnatomy anatomy = trace::step_anatomy(events);
  const trace::StepShares shares = trace::step_shares(events);
  std::printf("rank %zu: %d optimizer step(s) traced", rank, anatomy.steps);
  if (anatomy.step_ms > 0) std::printf(", %.1f ms apart", anatomy.step_ms);
  std::printf("\n");
  if (anatomy.steps == 0) return;
  const double steps = anatomy.steps;
  std::printf("  %-28s %10s %12s %22s\n", "collectives per step", "count", "bytes", "each");
  for (const auto& [kind, k] : anatomy.kinds)
    std::printf("  %-28s %10.1f %12s %22s\n", kind.c_str(), double(k.count) / steps,
                bytes_text(double(k.bytes) / steps).c_str(),
                (bytes_text(double(k.smallest)) + " - " + bytes_text(double(k.largest))).c_str());
  for (const auto& [kind, k] : anatomy.startup)
    std::printf("  before the first step: %lld x %s, %s in all\n", static_cast<long long>(k.count),
                kind.c_str(), bytes_text(double(k.bytes)).c_str());
  std::printf("  %-28s %10s %12s %22s   %s\n", "buckets of the last step", "bytes", "left (ms)",
              "all-reduce (ms)", "closed by");
  for (const trace::BucketDeparture& b : anatomy.buckets)
    std::printf("  bucket %-21d %10s %12s %22.2f   %s\n", b.bucket,
                bytes_text(double(b.bytes)).c_str(),
                (b.before_backward_end_ms > 0
                     ? std::to_string(int(b.before_backward_end_ms + 0.5)) + " before"
                     : std::to_string(int(-b.before_backward_end_ms + 0.5)) + " after")
                    .c_str(),
                b.duration_ms, b.closed_by.empty() ? "-" : b.closed_by.c_str());
  std::printf("  gradient all-reduce time hidden behind backward: %.0f%%; loader waits: %.1f%%\n",
              100 * shares.hidden_communication, 100 * shares.loader_wait);
}

// SyncBN's meetings over all ranks: what the latency and the waits for the last rank cost.
void print_meetings(const std::vector<std::vector<trace::Event>>& ranks) {
  const std::optional<trace::MeetingCosts> costs = trace::meeting_costs(ranks);
  if (!costs || costs->meetings == 0) return;
  const double steps = std::max(1, trace::step_anatomy(ranks[0]).steps);
  std::printf(
      "SyncBN meetings, all ranks: %.1f a step; latency (the last rank's time in them) %.2f ms a "
      "step, waits (the first rank's extra time) %.2f ms a step\n",
      double(costs->meetings) / steps, costs->latency_ms / steps, costs->wait_ms / steps);
  std::string longest;
  for (const auto& [name, ms] : costs->longest_waits_ms) {
    char text[96];
    std::snprintf(text, sizeof text, "%s%s %.2f ms", longest.empty() ? "" : ", ", name.c_str(), ms);
    longest += text;
  }
  std::printf("  the longest waits, on average per meeting: %s\n", longest.c_str());
}

// The last traced step as an SVG timeline (engine/trace_svg.h) in svg_file; its size in bytes.
size_t write_svg(const std::vector<std::vector<trace::Event>>& ranks) {
  std::string svg;
  try {
    svg = trace::step_svg(ranks);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(trace_file + ": " + error.what());
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(svg.data());
  write_file_atomically(svg_file, {std::span<const uint8_t>(bytes, svg.size())});
  return svg.size();
}

}  // namespace

void add_trace_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "trace-summary", "The anatomy of a traced step, from a `train --trace` file, per rank");
  cmd->add_option("file", trace_file,
                  "The Chrome trace `train --trace` wrote, or a run's flight/ folder (the ranks' "
                  "last collectives, written when one failed)")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("--svg", svg_file,
                  "Also draw the last traced step of every rank as an SVG timeline (compute, "
                  "gradient buckets, collectives, loader waits) to this file");
}

std::optional<int> run_trace_command(const CLI::App& app) {
  if (!app.got_subcommand("trace-summary")) return std::nullopt;
  if (std::filesystem::is_directory(trace_file)) {
    for (const std::string& line : dist::summarize_flights(dist::read_flight_folder(trace_file)))
      std::printf("%s\n", line.c_str());
    return 0;
  }
  const data::FileContents text = data::read_regular_file(trace_file);
  if (text.kind != data::FileContents::regular)
    throw std::invalid_argument(trace_file + ": " + text.error);
  std::vector<std::vector<trace::Event>> ranks;
  try {
    ranks = trace::events_from_chrome_json(text.bytes);
  } catch (const std::exception& error) {
    throw std::invalid_argument(trace_file + ": " + error.what());
  }
  // The drawing first: a trace it cannot draw, or a file it cannot write, fails before the
  // summary scrolls the message away.
  const size_t svg_bytes = svg_file.empty() ? 0 : write_svg(ranks);
  for (size_t rank = 0; rank < ranks.size(); ++rank) print_rank(rank, ranks[rank]);
  print_meetings(ranks);
  if (!svg_file.empty())
    std::printf("timeline of the last traced step: %s (%zu KB; open it in a browser)\n",
                svg_file.c_str(), (svg_bytes + 1023) / 1024);
  return 0;
}

}  // namespace bareyolo
