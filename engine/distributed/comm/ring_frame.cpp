// engine/distributed/comm/ring_frame.cpp — see ring_frame.h.
#include "engine/distributed/comm/ring_frame.h"

#include <algorithm>
#include <cstring>

namespace bareyolo::dist {

FrameHeader data_header(const CollectiveFingerprint& collective) {
  FrameHeader header{};
  header.kind = kData;
  header.sequence = collective.sequence;
  header.count = collective.count;
  header.op = static_cast<uint8_t>(collective.op);
  header.dtype = static_cast<uint8_t>(collective.dtype);
  std::memcpy(header.tag, collective.tag.data(), std::min(collective.tag.size(), kWireTagBytes));
  return header;
}

CollectiveFingerprint collective_of(const FrameHeader& header) {
  return {.sequence = header.sequence,
          .op = static_cast<CollectiveOp>(header.op),
          .dtype = static_cast<DType>(header.dtype),
          .count = header.count,
          .tag = std::string(header.tag, strnlen(header.tag, kWireTagBytes))};
}

// The tags compare up to their ends, as collective_of reads them: a sender zeroes the bytes after
// a tag, but a damaged frame's may not be zero, and a desync message would then name the same
// collective twice.
bool same_collective(const FrameHeader& a, const FrameHeader& b) {
  const size_t tag_bytes = strnlen(a.tag, kWireTagBytes);
  return a.sequence == b.sequence && a.count == b.count && a.op == b.op && a.dtype == b.dtype &&
         tag_bytes == strnlen(b.tag, kWireTagBytes) && std::memcmp(a.tag, b.tag, tag_bytes) == 0;
}

}  // namespace bareyolo::dist
