// engine/torch_zip.cpp — see torch_zip.h. Field offsets follow the zip specification
// (PKWARE APPNOTE): every read goes through `field`, which checks the range first.
#include "engine/torch_zip.h"

#include <array>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace bareyolo {

namespace {

constexpr uint32_t kLocalHeader = 0x04034b50, kCentralHeader = 0x02014b50,
                   kEndOfDirectory = 0x06054b50, kZip64EndOfDirectory = 0x06064b50,
                   kZip64Locator = 0x07064b50;
constexpr uint16_t kZip64ExtraField = 0x0001;
constexpr size_t kEndOfDirectoryBytes = 22, kCentralHeaderBytes = 46, kLocalHeaderBytes = 30;

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw std::invalid_argument(source + ": " + what + " (not a PyTorch checkpoint, or damaged)");
}

// Little-endian reads at a checked offset.
class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, const std::string& source)
      : bytes_(bytes), source_(source) {}
  template <class T>
  T field(uint64_t offset) const {
    if (offset > bytes_.size() || bytes_.size() - offset < sizeof(T))
      fail(source_, "a zip record at byte " + std::to_string(offset) + " runs past the end");
    T value;
    std::memcpy(&value, bytes_.data() + offset, sizeof(T));
    return value;
  }
  std::string text(uint64_t offset, uint64_t length) const {
    if (offset > bytes_.size() || bytes_.size() - offset < length)
      fail(source_, "a zip name at byte " + std::to_string(offset) + " runs past the end");
    return std::string(reinterpret_cast<const char*>(bytes_.data() + offset), length);
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& source_;
};

uint32_t crc32_of(std::span<const uint8_t> bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  uint32_t crc = 0xffffffffu;
  for (uint8_t b : bytes) crc = table[(crc ^ b) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

struct Directory {
  uint64_t offset = 0, entries = 0;
};

// The central directory's place, from the end record (zip64's when the 32-bit one says so).
Directory find_directory(const Reader& in, uint64_t file_bytes, const std::string& source) {
  if (file_bytes < kEndOfDirectoryBytes) fail(source, "too short for a zip");
  // The end record sits in the last 22 + 65535 (its longest comment) bytes.
  const uint64_t lowest =
      file_bytes > 0xffff + kEndOfDirectoryBytes ? file_bytes - 0xffff - kEndOfDirectoryBytes : 0;
  for (uint64_t at = file_bytes - kEndOfDirectoryBytes + 1; at-- > lowest;) {
    if (in.field<uint32_t>(at) != kEndOfDirectory) continue;
    if (in.field<uint16_t>(at + 4) != 0 || in.field<uint16_t>(at + 6) != 0)
      fail(source, "a multi-disk zip");
    Directory dir{in.field<uint32_t>(at + 16), in.field<uint16_t>(at + 10)};
    const bool zip64 = dir.offset == 0xffffffffu || dir.entries == 0xffff;
    if (zip64) {
      if (at < 20 || in.field<uint32_t>(at - 20) != kZip64Locator)
        fail(source, "a zip64 end record without its locator");
      const uint64_t record = in.field<uint64_t>(at - 20 + 8);
      if (in.field<uint32_t>(record) != kZip64EndOfDirectory)
        fail(source, "the zip64 locator points at no zip64 end record");
      dir = {in.field<uint64_t>(record + 48), in.field<uint64_t>(record + 32)};
    }
    return dir;
  }
  fail(source, "no zip end-of-central-directory record");
}

// An entry's 64-bit sizes and offset, from its zip64 extra field where the 32-bit ones are full.
void read_zip64_extra(const Reader& in, uint64_t extra, uint64_t extra_bytes, uint64_t& size,
                      uint64_t& compressed, uint64_t& local, const std::string& source) {
  for (uint64_t at = extra; at + 4 <= extra + extra_bytes;) {
    const uint16_t id = in.field<uint16_t>(at), length = in.field<uint16_t>(at + 2);
    if (id == kZip64ExtraField) {
      uint64_t next = at + 4;
      for (uint64_t* value : {&size, &compressed, &local})
        if (*value == 0xffffffffu) {
          if (next + 8 > at + 4 + length) fail(source, "a zip64 extra field too short");
          *value = in.field<uint64_t>(next);
          next += 8;
        }
      return;
    }
    at += 4 + uint64_t(length);
  }
}

}  // namespace

bool TorchZip::looks_like_zip(std::span<const uint8_t> bytes) {
  uint32_t signature = 0;
  if (bytes.size() >= 4) std::memcpy(&signature, bytes.data(), 4);
  return signature == kLocalHeader;
}

TorchZip TorchZip::parse(std::vector<uint8_t> file_bytes, const std::string& source) {
  TorchZip zip;
  zip.source_ = source;
  zip.bytes_ = std::move(file_bytes);
  const Reader in(zip.bytes_, source);
  const uint64_t file_size = zip.bytes_.size();
  const Directory dir = find_directory(in, file_size, source);
  // Each entry takes at least 46 bytes of directory: a larger count is a lie, not an allocation.
  if (dir.entries > file_size / kCentralHeaderBytes)
    fail(source, "the zip states " + std::to_string(dir.entries) + " entries");
  uint64_t at = dir.offset;
  for (uint64_t i = 0; i < dir.entries; ++i) {
    if (in.field<uint32_t>(at) != kCentralHeader)
      fail(source, "zip directory entry " + std::to_string(i) + " is not where the end says");
    const uint16_t flags = in.field<uint16_t>(at + 8), method = in.field<uint16_t>(at + 10);
    const uint32_t crc = in.field<uint32_t>(at + 16);
    uint64_t compressed = in.field<uint32_t>(at + 20), size = in.field<uint32_t>(at + 24);
    const uint16_t name_bytes = in.field<uint16_t>(at + 28),
                   extra_bytes = in.field<uint16_t>(at + 30),
                   comment_bytes = in.field<uint16_t>(at + 32);
    uint64_t local = in.field<uint32_t>(at + 42);
    const std::string name = in.text(at + kCentralHeaderBytes, name_bytes);
    read_zip64_extra(in, at + kCentralHeaderBytes + name_bytes, extra_bytes, size, compressed,
                     local, source);
    at += kCentralHeaderBytes + uint64_t(name_bytes) + extra_bytes + comment_bytes;

    const std::string where = "zip entry '" + name + "'";
    if (flags & 1) fail(source, where + " is encrypted");
    // torch.save stores every record; a compressed one was written by another tool.
    if (method != 0 || compressed != size)
      fail(source, where + " is compressed (method " + std::to_string(method) +
                       "); torch.save stores its records uncompressed");
    if (in.field<uint32_t>(local) != kLocalHeader)
      fail(source, where + " has no local header at byte " + std::to_string(local));
    const uint64_t data =
        local + kLocalHeaderBytes + in.field<uint16_t>(local + 26) + in.field<uint16_t>(local + 28);
    if (data > file_size || file_size - data < size)
      fail(source, where + " runs past the end of the " + std::to_string(file_size) +
                       "-byte file (truncated?)");
    if (crc32_of(std::span(zip.bytes_).subspan(data, size)) != crc)
      fail(source, where + " fails its CRC-32 check");

    const size_t slash = name.find('/');
    if (slash == std::string::npos || slash == 0)
      fail(source, where + " is not inside a folder, as torch.save writes every record");
    const std::string folder = name.substr(0, slash);
    if (zip.folder_.empty()) zip.folder_ = folder;
    if (folder != zip.folder_)
      fail(source, where + " is outside the folder '" + zip.folder_ + "' of the others");
    if (!zip.entries_.emplace(name.substr(slash + 1), Range{data, size}).second)
      fail(source, where + " appears twice");
  }
  if (zip.entries_.empty()) fail(source, "an empty zip");
  return zip;
}

TorchZip TorchZip::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open '" + path + "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error("cannot read '" + path + "'");
  return parse(std::move(bytes), path);
}

bool TorchZip::contains(const std::string& relative) const { return entries_.count(relative) > 0; }

std::span<const uint8_t> TorchZip::entry(const std::string& relative) const {
  auto it = entries_.find(relative);
  if (it == entries_.end())
    throw std::invalid_argument(source_ + ": the checkpoint has no record '" + folder_ + "/" +
                                relative + "' (not a PyTorch checkpoint, or damaged)");
  return std::span(bytes_).subspan(it->second.offset, it->second.size);
}

}  // namespace bareyolo
