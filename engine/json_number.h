// engine/json_number.h — a whole number read from JSON that may come from anywhere (a cache,
// a trace, a flight record), checked before it is used.
//
// nlohmann's get<int>() casts whatever number it finds: 1e300 into an int is undefined
// behaviour, 4294967296 silently becomes 0. Readers of files a user or a crash may have damaged
// take their integers through this instead.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace bareyolo {

// The bound on microsecond timestamps and durations read back (2^53: 285 years), which keeps
// sums and differences of two within int64_t.
inline constexpr int64_t kJsonMaxMicroseconds = int64_t(1) << 53;

// `value` as a whole number in [low, high]; throws std::invalid_argument naming `what` and the
// value otherwise (a float, a string, out of range).
int64_t json_whole_number(const nlohmann::json& value, int64_t low, int64_t high,
                          const std::string& what);

}  // namespace bareyolo
