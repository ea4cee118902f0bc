// engine/distributed/comm/even_parts.h — a buffer cut into N parts that differ by at most one
// element: the chunks of the TCP ring's schedule, the slices of the shm communicator's.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bareyolo::dist {

// Part i of `count` elements holds elements [count * i / parts, count * (i + 1) / parts), so
// any count works — 0 and counts below `parts` included (those parts are empty). Offsets and
// sizes are in bytes.
struct EvenParts {
  int64_t count;
  int parts;
  size_t element_bytes;

  size_t offset(int part) const { return size_t(count * part / parts) * element_bytes; }
  size_t bytes(int part) const { return offset(part + 1) - offset(part); }
};

}  // namespace bareyolo::dist
