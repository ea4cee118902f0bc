// engine/distributed/comm/flight_recorder.h — each rank's last collectives, kept in memory and
// written out when the job fails, so that a hang or a lost rank can be read afterwards.
//
// When a collective fails (a lost peer, a timeout, a desync), what matters is what every rank
// was doing: which collective each last issued, which finished, which never started. Each rank
// keeps its last `capacity` collectives (fingerprint, bytes, when issued, when seen complete) in
// a ring; the watched communicator (watched_communicator.h) writes it to <run>/flight/rank<R>.json
// on the first failure, and `bareyolo trace-summary <run>/flight` reads the ranks' files
// together (flight_summary.h). Times are the steady clock's microseconds, the trace's clock
// (engine/trace.h): comparable between the processes of one machine.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/distributed/comm/collective_fingerprint.h"

namespace bareyolo::dist {

struct FlightRecord {
  CollectiveFingerprint collective;
  int64_t bytes = 0;
  int64_t issued_us = 0;               // steady clock
  std::optional<int64_t> finished_us;  // when this rank saw it complete; none: it never did
};

class FlightRecorder {
 public:
  explicit FlightRecorder(size_t capacity = 1024) : capacity_(capacity) {}

  void issued(const CollectiveFingerprint& collective, int64_t bytes);
  void finished(uint64_t sequence);
  // The kept records, oldest first.
  std::vector<FlightRecord> records() const;
  size_t capacity() const { return capacity_; }

 private:
  // Collective k (numbered from 1) lives at (k - 1) % capacity, so a newer one overwrites the
  // oldest.
  size_t slot_of(uint64_t sequence) const { return size_t((sequence - 1) % capacity_); }

  const size_t capacity_;
  mutable std::mutex mutex_;
  std::vector<FlightRecord> ring_;
};

// The steady clock now, in the records' microseconds.
int64_t flight_clock_us();

// Writes `<folder>/rank<rank>.json` (atomically; the folder is created): the rank, the world
// size, why it was written, the wall-clock time, and the records. Returns the path.
std::string write_flight_record(const std::string& folder, int rank, int world_size,
                                const std::string& reason,
                                const std::vector<FlightRecord>& records);

// One rank's file, as written above. Throws naming the file when it is not one.
struct FlightFile {
  int rank = 0;
  int world_size = 0;
  std::string reason;
  int64_t written_us = 0;  // steady clock, as the records
  std::vector<FlightRecord> records;
};
FlightFile read_flight_record(const std::string& path);
// The same from a file's text (`path` names it in messages): a crashed rank's file may be cut
// short or damaged, so every number is checked (rank < world_size, counts >= 0, timestamps
// within kJsonMaxMicroseconds).
FlightFile parse_flight_record(const std::string& text, const std::string& path);

}  // namespace bareyolo::dist
