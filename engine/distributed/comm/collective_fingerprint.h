// engine/distributed/comm/collective_fingerprint.h — what names one collective, so that ranks can
// check they are in the same one.
//
// Every rank must issue the same collectives in the same order (communicator.h). When one does
// not — a gradient bucket issued out of turn, a SyncBN meeting skipped, a buffer of another size
// — the bytes of two different collectives meet, and when their sizes agree they mix silently.
// A fingerprint is what every rank must agree on for one collective: its number in the
// communicator's issue order, the operation, the element type and count, and the caller's tag
// ("bucket 3", "SyncBN model.2.cv1.bn", "validation gather"). The TCP ring sends it with every
// frame and compares it with its own (ring_link.h); to_string() is how messages name a
// collective.
#pragma once

#include <cstdint>
#include <string>

#include "engine/tensor.h"

namespace bareyolo::dist {

enum class CollectiveOp : uint8_t { all_reduce, broadcast, all_gather, barrier };
const char* to_string(CollectiveOp op);

struct CollectiveFingerprint {
  uint64_t sequence = 0;  // its number among the communicator's collectives, from 1
  CollectiveOp op = CollectiveOp::barrier;
  DType dtype = DType::f32;
  int64_t count = 0;     // elements on each rank (all_gather: each rank's send count)
  std::string tag = "";  // the caller's name for it; "" when it gave none

  bool operator==(const CollectiveFingerprint&) const = default;
};

// "all_reduce #5120 bucket 3 (1,234,560 floats)"; a barrier has no count: "barrier #7".
std::string to_string(const CollectiveFingerprint& collective);

// What every rank must do instead, as every desync message ends.
inline constexpr const char* kSameCollectivesRule =
    ": every rank must issue the same collectives, with buffers of the same count and dtype, in "
    "the same order (docs/ddp.md, \"Desynchronised collectives\")";

// The message of a desync that ranks `rank_a` and `rank_b` found: "rank A issued ... where rank
// B issued ...", and the rule above. Every backend that checks says it so.
std::string issued_differently(int rank_a, const CollectiveFingerprint& a, int rank_b,
                               const CollectiveFingerprint& b);

}  // namespace bareyolo::dist
