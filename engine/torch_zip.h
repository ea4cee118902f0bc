// engine/torch_zip.h — the zip container of a PyTorch checkpoint (.pt), read from memory.
//
// torch.save writes a zip whose entries are all *stored* (uncompressed, so that tensors can be
// memory-mapped): <folder>/data.pkl (the pickle), <folder>/data/<key> (one raw little-endian
// storage each), <folder>/version and, from torch 2.x, a few more small records
// (<folder>/byteorder, <folder>/.data/serialization_id, ...). The folder is "archive" or the
// file's stem, depending on the torch version; every entry sits in the same one.
//
// Only what such a file uses is read: the end-of-central-directory record (zip64 too, which
// torch writes past 4 GiB or 65535 entries), the central directory, stored entries and their
// CRC-32. A compressed, encrypted or multi-disk entry, an out-of-file range and a
// CRC mismatch are refused with the file and the entry named: a damaged checkpoint fails here,
// before a single value is used.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace bareyolo {

class TorchZip {
 public:
  // Reads and checks the whole archive image; `source` names it in error messages.
  static TorchZip parse(std::vector<uint8_t> file_bytes, const std::string& source);
  static TorchZip load(const std::string& path);

  // True when `bytes` begins as a zip does ("PK\3\4"): what tells a .pt from a .safetensors.
  static bool looks_like_zip(std::span<const uint8_t> bytes);

  // The one top-level folder every entry is in ("archive", or the file stem).
  const std::string& folder() const { return folder_; }
  // Whether the archive has `folder()/relative`, and its bytes (throws naming the entry when
  // absent).
  bool contains(const std::string& relative) const;
  std::span<const uint8_t> entry(const std::string& relative) const;
  const std::string& source() const { return source_; }

 private:
  struct Range {
    uint64_t offset = 0, size = 0;
  };
  std::string source_, folder_;
  std::vector<uint8_t> bytes_;
  std::map<std::string, Range> entries_;  // relative name -> data range in bytes_
};

}  // namespace bareyolo
