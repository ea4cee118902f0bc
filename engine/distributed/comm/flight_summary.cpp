// engine/distributed/comm/flight_summary.cpp — see flight_summary.h.
#include "engine/distributed/comm/flight_summary.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>

namespace bareyolo::dist {

std::vector<FlightFile> read_flight_folder(const std::string& folder) {
  std::vector<FlightFile> ranks;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("rank") && name.ends_with(".json"))
      ranks.push_back(read_flight_record(entry.path().string()));
  }
  if (error || ranks.empty())
    throw std::runtime_error(folder +
                             " holds no flight record (rank<N>.json): a rank writes one "
                             "into <run>/flight when a collective fails");
  std::sort(ranks.begin(), ranks.end(),
            [](const FlightFile& a, const FlightFile& b) { return a.rank < b.rank; });
  return ranks;
}

namespace {

std::string seconds_before(int64_t earlier_us, int64_t later_us) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", double(later_us - earlier_us) / 1e6);
  return text;
}

}  // namespace

std::vector<std::string> summarize_flights(const std::vector<FlightFile>& ranks) {
  std::vector<std::string> lines;
  const int world = ranks.empty() ? 0 : ranks.front().world_size;
  lines.push_back("flight records of " + std::to_string(ranks.size()) + " of " +
                  std::to_string(world) + " ranks");
  uint64_t newest = 0;
  std::map<int, const FlightFile*> by_rank;
  for (const FlightFile& file : ranks) {
    by_rank[file.rank] = &file;
    if (!file.records.empty()) newest = std::max(newest, file.records.back().collective.sequence);
  }
  // Per rank in order; the ranks without a record a range at a time (a large job may miss
  // thousands, and a damaged file may claim any world size).
  int unreported = 0;  // the lowest rank not yet named
  const auto name_missing_before = [&](int end) {
    if (unreported >= end) return;
    lines.push_back((end - unreported == 1
                         ? "rank " + std::to_string(unreported)
                         : "ranks " + std::to_string(unreported) + "-" + std::to_string(end - 1)) +
                    ": no record (killed before it could write one, or it did not fail)");
  };
  for (const auto& [rank, found] : by_rank) {
    if (rank >= world) break;
    name_missing_before(rank);
    unreported = rank + 1;
    const FlightFile& file = *found;
    std::string line = "rank " + std::to_string(rank) + ": ";
    if (file.records.empty()) {
      line += "issued no collective";
    } else {
      const FlightRecord& last = file.records.back();
      line += "last issued " + to_string(last.collective) + " " +
              seconds_before(last.issued_us, file.written_us) + " before it failed, " +
              (last.finished_us ? "finished" : "never finished");
    }
    lines.push_back(line + "; it failed with: " + file.reason);
  }
  name_missing_before(world);
  for (const FlightFile& file : ranks) {
    const uint64_t issued = file.records.empty() ? 0 : file.records.back().collective.sequence;
    if (issued < newest)
      lines.push_back("rank " + std::to_string(file.rank) + " never reached collective #" +
                      std::to_string(newest) + " (its last was #" + std::to_string(issued) + ")");
  }
  // The first number two ranks recorded differently: where their collectives part.
  std::map<uint64_t, std::pair<int, const CollectiveFingerprint*>> first_seen;
  for (const FlightFile& file : ranks) {
    for (const FlightRecord& record : file.records) {
      const auto [at, inserted] =
          first_seen.try_emplace(record.collective.sequence, file.rank, &record.collective);
      if (inserted || *at->second.second == record.collective) continue;
      lines.push_back("the ranks part at collective #" +
                      std::to_string(record.collective.sequence) + ": rank " +
                      std::to_string(file.rank) + " issued " + to_string(record.collective) +
                      " where rank " + std::to_string(at->second.first) + " issued " +
                      to_string(*at->second.second));
      return lines;
    }
  }
  return lines;
}

}  // namespace bareyolo::dist
