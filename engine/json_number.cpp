// engine/json_number.cpp — see json_number.h.
#include "engine/json_number.h"

#include <stdexcept>

namespace bareyolo {

int64_t json_whole_number(const nlohmann::json& value, int64_t low, int64_t high,
                          const std::string& what) {
  const auto refuse = [&] {
    return std::invalid_argument(what + " is " + value.dump() + ", not a whole number in [" +
                                 std::to_string(low) + ", " + std::to_string(high) + "]");
  };
  if (!value.is_number_integer()) throw refuse();
  // An unsigned beyond int64_t's range is above any `high`.
  if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX)) throw refuse();
  const int64_t number = value.get<int64_t>();
  if (number < low || number > high) throw refuse();
  return number;
}

}  // namespace bareyolo
