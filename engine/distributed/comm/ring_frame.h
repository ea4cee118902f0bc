// engine/distributed/comm/ring_frame.h — the TCP ring's wire format: the header every frame
// starts with, which names the collective the frame belongs to. All ranks run on one byte order.
//
//     FrameHeader {u32 kind, u32 payload_bytes, u64 sequence,
//                  i64 count, u8 op, u8 dtype, char tag[38]}  (64 bytes) | payload
//
// A data frame's header carries its collective's whole fingerprint (collective_fingerprint.h),
// so the receiving rank compares it with its own collective before it touches the payload: a
// rank that issued another collective — out of order, with another tag, another count — is
// named at the first frame, with both collectives, instead of its bytes being reduced into the
// wrong buffer. The tag travels cut to 38 bytes (zero-padded): tags that differ only beyond
// that compare equal. An abort notice is {abort, text bytes, lost rank} | text and a goodbye
// {goodbye, 0, 0}, their fingerprint fields zero (ring_link.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/distributed/comm/collective_fingerprint.h"

namespace bareyolo::dist {

// The hello a rank opens its connection to the next one with starts with these 16 bytes; the
// number is the wire format's version, raised with each change, so that a rank of a build
// with another format is not taken for a neighbour.
inline constexpr char kRingHelloMagic[16] = "bareyolo-ring-3";

// "DATA", "ABOR", "BYE!"
enum FrameKind : uint32_t { kData = 0x44415441, kAbort = 0x41424f52, kGoodbye = 0x21455942 };

inline constexpr size_t kWireTagBytes = 38;

struct FrameHeader {
  uint32_t kind;
  uint32_t payload_bytes;
  uint64_t sequence;  // the collective's issue number; for kAbort, the lost rank
  int64_t count;      // the rest: the collective's fingerprint (zero but for kData)
  uint8_t op;
  uint8_t dtype;
  char tag[kWireTagBytes];
};
static_assert(sizeof(FrameHeader) == 64, "no padding: headers are compared and sent as bytes");

// The header of a data frame of `collective`; payload_bytes is set frame by frame.
FrameHeader data_header(const CollectiveFingerprint& collective);

// The collective a data frame's header names (its tag as far as the header holds it).
CollectiveFingerprint collective_of(const FrameHeader& header);

// True when two data frames' headers name the same collective.
bool same_collective(const FrameHeader& a, const FrameHeader& b);

}  // namespace bareyolo::dist
