// engine/distributed/comm/flight_recorder.cpp — see flight_recorder.h.
#include "engine/distributed/comm/flight_recorder.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "engine/atomic_file.h"
#include "engine/json_number.h"

namespace bareyolo::dist {

int64_t flight_clock_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void FlightRecorder::issued(const CollectiveFingerprint& collective, int64_t bytes) {
  const std::lock_guard lock(mutex_);
  const size_t at = slot_of(collective.sequence);
  if (ring_.size() <= at) ring_.resize(at + 1);
  ring_[at] = FlightRecord{collective, bytes, flight_clock_us(), std::nullopt};
}

void FlightRecorder::finished(uint64_t sequence) {
  const std::lock_guard lock(mutex_);
  const size_t at = slot_of(sequence);
  // A record overwritten by a newer one holds another sequence: nothing to mark.
  if (at < ring_.size() && ring_[at].collective.sequence == sequence && !ring_[at].finished_us)
    ring_[at].finished_us = flight_clock_us();
}

std::vector<FlightRecord> FlightRecorder::records() const {
  const std::lock_guard lock(mutex_);
  std::vector<FlightRecord> ordered;
  for (const FlightRecord& record : ring_)
    if (record.collective.sequence != 0) ordered.push_back(record);
  std::sort(ordered.begin(), ordered.end(), [](const FlightRecord& a, const FlightRecord& b) {
    return a.collective.sequence < b.collective.sequence;
  });
  return ordered;
}

std::string write_flight_record(const std::string& folder, int rank, int world_size,
                                const std::string& reason,
                                const std::vector<FlightRecord>& records) {
  nlohmann::json collectives = nlohmann::json::array();
  for (const FlightRecord& record : records) {
    collectives.push_back({{"sequence", record.collective.sequence},
                           {"op", to_string(record.collective.op)},
                           {"dtype", dtype_name(record.collective.dtype)},
                           {"count", record.collective.count},
                           {"tag", record.collective.tag},
                           {"bytes", record.bytes},
                           {"issued_us", record.issued_us},
                           {"finished_us", record.finished_us ? nlohmann::json(*record.finished_us)
                                                              : nlohmann::json(nullptr)}});
  }
  const nlohmann::json file = {{"rank", rank},
                               {"world_size", world_size},
                               {"reason", reason},
                               {"written_us", flight_clock_us()},
                               {"written_at", std::time(nullptr)},
                               {"collectives", std::move(collectives)}};
  std::filesystem::create_directories(folder);
  const std::string path =
      (std::filesystem::path(folder) / ("rank" + std::to_string(rank) + ".json")).string();
  const std::string text = file.dump(1) + "\n";
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  write_file_atomically(path, {std::span<const uint8_t>(bytes, text.size())});
  return path;
}

namespace {

CollectiveOp op_named(const std::string& name, const std::string& path) {
  for (CollectiveOp op : {CollectiveOp::all_reduce, CollectiveOp::broadcast,
                          CollectiveOp::all_gather, CollectiveOp::barrier})
    if (name == to_string(op)) return op;
  throw std::runtime_error(path + ": '" + name + "' is not a collective's name");
}

DType dtype_named(const std::string& name, const std::string& path) {
  for (DType dtype : {DType::f32, DType::f64, DType::i64, DType::f16, DType::bf16, DType::u8})
    if (name == dtype_name(dtype)) return dtype;
  throw std::runtime_error(path + ": '" + name + "' is not an element type");
}

}  // namespace

FlightFile parse_flight_record(const std::string& text, const std::string& path) {
  const auto number = [&path](const nlohmann::json& object, const char* key, int64_t low,
                              int64_t high) {
    return json_whole_number(object.at(key), low, high, path + ": \"" + std::string(key) + "\"");
  };
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  try {
    const nlohmann::json file = nlohmann::json::parse(text);
    const int world_size = int(number(file, "world_size", 1, kMaxInt));
    FlightFile flight{.rank = int(number(file, "rank", 0, world_size - 1)),
                      .world_size = world_size,
                      .reason = file.at("reason"),
                      .written_us = number(file, "written_us", 0, kJsonMaxMicroseconds),
                      .records = {}};
    for (const nlohmann::json& entry : file.at("collectives")) {
      FlightRecord record;
      record.collective.sequence = uint64_t(number(entry, "sequence", 1, INT64_MAX));
      record.collective.op = op_named(entry.at("op"), path);
      record.collective.dtype = dtype_named(entry.at("dtype"), path);
      record.collective.count = number(entry, "count", 0, INT64_MAX);
      record.collective.tag = entry.at("tag");
      record.bytes = number(entry, "bytes", 0, INT64_MAX);
      record.issued_us = number(entry, "issued_us", 0, kJsonMaxMicroseconds);
      if (!entry.at("finished_us").is_null())
        record.finished_us = number(entry, "finished_us", 0, kJsonMaxMicroseconds);
      flight.records.push_back(std::move(record));
    }
    return flight;
  } catch (const nlohmann::json::exception& error) {
    throw std::runtime_error(path + " is not a flight record bareyolo wrote: " + error.what());
  } catch (const std::invalid_argument& error) {
    throw std::runtime_error(std::string(error.what()) + ": not a flight record bareyolo wrote");
  }
}

FlightFile read_flight_record(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read the flight record " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_flight_record(text.str(), path);
}

}  // namespace bareyolo::dist
