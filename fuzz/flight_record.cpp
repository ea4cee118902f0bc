// fuzz/flight_record.cpp — fuzz target: the flight records of a failed job's ranks
// (engine/distributed/comm/flight_recorder.h), read and summarised as `bareyolo trace-summary
// <run>/flight` does (flight_summary.h). A rank that crashed may have left any bytes.
//
// Input: the ranks' files one after another, separated by a NUL byte (JSON text holds none).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/distributed/comm/flight_summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace dist = bareyolo::dist;
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<dist::FlightFile> ranks;
  for (size_t begin = 0; begin <= input.size();) {
    const size_t end = std::min(input.find('\0', begin), input.size());
    try {
      ranks.push_back(dist::parse_flight_record(input.substr(begin, end - begin),
                                                "rank" + std::to_string(ranks.size()) + ".json"));
    } catch (const std::runtime_error&) {  // a refusal naming the file: what bad input gets
      return 0;
    }
    begin = end + 1;
  }
  for (const std::string& line : dist::summarize_flights(ranks)) (void)line;
  return 0;
}
