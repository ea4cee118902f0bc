// engine/tfevents.h — TensorBoard's event files, written without TensorFlow: a file of records
// in TFRecord framing, each an Event protocol buffer. Only what scalars need is encoded:
//
//   record   uint64 length (little-endian), uint32 masked crc32c of those 8 bytes,
//            the data, uint32 masked crc32c of the data
//   masked   ((crc >> 15) | (crc << 17)) + 0xa282ead8, so a CRC stored inside data that is
//            itself checksummed does not check out by accident
//   Event    1: wall_time (double, seconds), 2: step (int64), then either
//            3: file_version ("brain.Event:2", the first record of every file) or
//            5: summary (a Summary message)
//   Summary  1: value (repeated Value); Value 1: tag (string), 2: simple_value (float)
//
// The protobuf wire format is written by hand (a varint and three field kinds), which keeps
// libprotobuf out of the engine.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bareyolo {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses; and its masked form.
uint32_t crc32c(std::string_view bytes);
uint32_t masked_crc32c(std::string_view bytes);

// One TFRecord: the framing around `data`.
std::string tfrecord(std::string_view data);

// The Event messages TensorBoard reads first and for scalars.
std::string file_version_event(double wall_time);
std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<std::pair<std::string, float>>& scalars);

// An events file being written: the file-version record on open, then a record of scalars per
// call, flushed at once so TensorBoard sees a live run. Throws std::runtime_error naming the
// file when it cannot be opened or written.
class EventsFile {
 public:
  explicit EventsFile(std::string path);
  ~EventsFile();
  EventsFile(const EventsFile&) = delete;
  EventsFile& operator=(const EventsFile&) = delete;

  void add_scalars(int64_t step, const std::vector<std::pair<std::string, float>>& scalars);
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& event);
  std::string path_;
  std::FILE* file_ = nullptr;
};

// The seconds since the Unix epoch, as an Event's wall_time.
double wall_time_now();

}  // namespace bareyolo
