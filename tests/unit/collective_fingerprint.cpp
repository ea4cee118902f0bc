// tests/unit/collective_fingerprint.cpp — how a collective is named in a desync message, and how
// its fingerprint travels in a TCP ring frame's header. The tags the callers give are checked in
// tests/unit/reducer.cpp, the multi-process failures in tests/dist/desync.cpp.
#include <limits>
#include <string>
#include <vector>

#include "engine/distributed/comm/collective_fingerprint.h"
#include "engine/distributed/comm/ring_frame.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::dist;

TEST_CASE("collective fingerprint: named with its number, tag and count") {
  CHECK(to_string(CollectiveFingerprint{.sequence = 5120,
                                        .op = CollectiveOp::all_reduce,
                                        .dtype = DType::f32,
                                        .count = 1234560,
                                        .tag = "bucket 3"}) ==
        "all_reduce #5120 bucket 3 (1,234,560 floats)");
  CHECK(to_string(CollectiveFingerprint{
            .sequence = 7, .op = CollectiveOp::all_gather, .dtype = DType::f64, .count = 1}) ==
        "all_gather #7 (1 double)");
  CHECK(to_string(CollectiveFingerprint{.sequence = 2,
                                        .op = CollectiveOp::broadcast,
                                        .dtype = DType::i64,
                                        .count = 999,
                                        .tag = "validation numbers"}) ==
        "broadcast #2 validation numbers (999 int64s)");
  CHECK(to_string(CollectiveFingerprint{
            .sequence = 9, .op = CollectiveOp::barrier, .tag = "image caches"}) ==
        "barrier #9 image caches");
  // Any count a damaged frame may carry (fuzz/regressions/ring_frame/): the most negative too.
  CHECK(to_string(CollectiveFingerprint{.sequence = 1,
                                        .op = CollectiveOp::all_reduce,
                                        .count = std::numeric_limits<int64_t>::min()}) ==
        "all_reduce #1 (-9,223,372,036,854,775,808 floats)");
}

TEST_CASE("ring frame header: carries the fingerprint, compares every field of it") {
  const CollectiveFingerprint bucket{.sequence = 41,
                                     .op = CollectiveOp::all_reduce,
                                     .dtype = DType::bf16,
                                     .count = 300000,
                                     .tag = "bucket 3"};
  const FrameHeader header = data_header(bucket);
  CHECK(header.kind == kData);
  CHECK(collective_of(header) == bucket);
  CHECK(same_collective(header, data_header(bucket)));
  for (auto change : std::vector<void (*)(CollectiveFingerprint&)>{
           [](CollectiveFingerprint& c) { ++c.sequence; },
           [](CollectiveFingerprint& c) { c.op = CollectiveOp::all_gather; },
           [](CollectiveFingerprint& c) { c.dtype = DType::f32; },
           [](CollectiveFingerprint& c) { --c.count; },
           [](CollectiveFingerprint& c) { c.tag = "bucket 4"; }}) {
    CollectiveFingerprint other = bucket;
    change(other);
    CHECK_FALSE(same_collective(header, data_header(other)));
  }
  // Bytes after the tag's end are not part of it (fuzz/regressions/ring_frame/).
  FrameHeader padded = header;
  padded.tag[kWireTagBytes - 1] = 'x';
  CHECK(same_collective(padded, header));
  // A tag longer than the header's field travels cut to it.
  const std::string long_tag = "SyncBN model.23.m.2.cv3.bn and much more besides";
  CollectiveFingerprint tagged = bucket;
  tagged.tag = long_tag;
  CHECK(collective_of(data_header(tagged)).tag == long_tag.substr(0, kWireTagBytes));
}
