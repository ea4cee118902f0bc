// fuzz/ring_frame.cpp — fuzz target: the TCP ring's frame header
// (engine/distributed/comm/ring_frame.h), as a receiving rank reads one: the collective it names,
// compared with the one this rank runs, and the message naming both.
//
// Input: the 64 bytes received, then 64 bytes from which this rank's own collective is taken.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "engine/distributed/comm/ring_frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bareyolo::dist;
  FrameHeader theirs{}, ours_source{};
  if (size < 2 * sizeof(FrameHeader)) return 0;
  std::memcpy(&theirs, data, sizeof theirs);
  std::memcpy(&ours_source, data + sizeof theirs, sizeof ours_source);
  const FrameHeader ours = data_header(collective_of(ours_source));
  const CollectiveFingerprint received = collective_of(theirs);
  (void)to_string(received);
  (void)to_string(collective_of(ours));
  // Headers are equal exactly when the collectives they name are: a desync message never
  // names the same collective twice.
  if (same_collective(theirs, ours) != (received == collective_of(ours))) std::abort();
  return 0;
}
