// tests/support/stored_zip.h — a zip of stored (uncompressed) records, as torch.save writes one,
// for tests that craft a checkpoint byte by byte. Its CRC-32 is computed here, apart from the
// reader's (engine/torch_zip.cpp), so that the two check each other.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bareyolo::testing {

// CRC-32 of zip (polynomial 0xedb88320, reflected), bit by bit.
inline uint32_t zip_crc32(const std::string& bytes) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : bytes) {
    crc ^= c;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// The zip of `records` (name, bytes), in order: local headers with the data, the central
// directory, the end record.
inline std::vector<uint8_t> stored_zip(
    const std::vector<std::pair<std::string, std::string>>& records) {
  std::string file, directory;
  auto put = [](std::string& out, uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out += char((value >> (8 * i)) & 0xff);
  };
  for (const auto& [name, data] : records) {
    const uint32_t crc = zip_crc32(data), offset = uint32_t(file.size());
    // Local header: signature, version 2.0, flags, method 0 (stored), time, date, CRC, sizes,
    // name length, no extra field.
    put(file, 0x04034b50, 4), put(file, 20, 2), put(file, 0, 2), put(file, 0, 2);
    put(file, 0, 4), put(file, crc, 4), put(file, data.size(), 4), put(file, data.size(), 4);
    put(file, name.size(), 2), put(file, 0, 2);
    file += name + data;
    // Its directory entry: the same fields, then comment length, disk, attributes, offset.
    put(directory, 0x02014b50, 4), put(directory, 20, 2), put(directory, 20, 2);
    put(directory, 0, 2), put(directory, 0, 2), put(directory, 0, 4), put(directory, crc, 4);
    put(directory, data.size(), 4), put(directory, data.size(), 4), put(directory, name.size(), 2);
    put(directory, 0, 2), put(directory, 0, 2), put(directory, 0, 2), put(directory, 0, 2);
    put(directory, 0, 4), put(directory, offset, 4);
    directory += name;
  }
  const uint32_t directory_offset = uint32_t(file.size());
  file += directory;
  put(file, 0x06054b50, 4), put(file, 0, 2), put(file, 0, 2), put(file, records.size(), 2);
  put(file, records.size(), 2), put(file, directory.size(), 4), put(file, directory_offset, 4);
  put(file, 0, 2);
  return std::vector<uint8_t>(file.begin(), file.end());
}

}  // namespace bareyolo::testing
