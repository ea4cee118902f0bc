// engine/tfevents.cpp — see tfevents.h.
#include "engine/tfevents.h"

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace bareyolo {

namespace {

// The byte-at-a-time table of the reflected CRC-32C.
std::array<uint32_t, 256> crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    table[i] = crc;
  }
  return table;
}

// ---- protobuf's wire format: a field is (number << 3 | wire type), then its value ----
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += char(uint8_t(value) | 0x80);
    value >>= 7;
  }
  out += char(uint8_t(value));
}

void put_key(std::string& out, uint32_t field, WireType type) {
  put_varint(out, field << 3 | type);
}

template <class T>
void put_little_endian(std::string& out, T value) {
  uint8_t bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // x86 and ARM Linux are little-endian
  out.append(reinterpret_cast<const char*>(bytes), sizeof(T));
}

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Event fields 1 (wall_time) and 2 (step).
std::string event_header(double wall_time, int64_t step) {
  std::string event;
  put_key(event, 1, kFixed64);
  put_little_endian(event, wall_time);
  put_key(event, 2, kVarint);
  put_varint(event, uint64_t(step));
  return event;
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = crc32c_table();
  uint32_t crc = 0xFFFFFFFFu;
  for (char c : bytes) crc = table[(crc ^ uint8_t(c)) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

std::string tfrecord(std::string_view data) {
  std::string length;
  put_little_endian(length, uint64_t(data.size()));
  std::string record = length;
  put_little_endian(record, masked_crc32c(length));
  record.append(data);
  put_little_endian(record, masked_crc32c(data));
  return record;
}

std::string file_version_event(double wall_time) {
  std::string event = event_header(wall_time, 0);
  put_bytes(event, 3, "brain.Event:2");
  return event;
}

std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<std::pair<std::string, float>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string entry;
    put_bytes(entry, 1, tag);
    put_key(entry, 2, kFixed32);
    put_little_endian(entry, value);
    put_bytes(summary, 1, entry);
  }
  std::string event = event_header(wall_time, step);
  put_bytes(event, 5, summary);
  return event;
}

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

EventsFile::EventsFile(std::string path) : path_(std::move(path)) {
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_)
    throw std::runtime_error("cannot create the TensorBoard events file " + path_ + ": " +
                             std::strerror(errno));
  write_record(file_version_event(wall_time_now()));
}

EventsFile::~EventsFile() {
  if (file_) std::fclose(file_);
}

void EventsFile::add_scalars(int64_t step,
                             const std::vector<std::pair<std::string, float>>& scalars) {
  write_record(scalars_event(wall_time_now(), step, scalars));
}

void EventsFile::write_record(const std::string& event) {
  const std::string record = tfrecord(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() ||
      std::fflush(file_) != 0)
    throw std::runtime_error("cannot write the TensorBoard events file " + path_ + ": " +
                             std::strerror(errno));
}

}  // namespace bareyolo
