// engine/json_numbers.h — a whole number read from JSON that a file brought (a checkpoint's
// metadata, a saved configuration), checked. nlohmann's get<int>() casts whatever number it
// finds: a fraction is cut silently, and a float outside the type's range (3e88) makes the
// cast undefined behaviour (found by fuzz/checkpoint_metadata.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include <concepts>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace bareyolo {

// Sets `target` to `value` when that is a JSON integer within Integer's range; else throws
// std::invalid_argument naming `what` ("the saved configuration's 'epochs'"), the value and
// the range.
template <std::integral Integer>
void read_whole_number(const nlohmann::json& value, Integer& target, const std::string& what) {
  const bool fits = value.is_number_unsigned()  ? std::in_range<Integer>(value.get<uint64_t>())
                    : value.is_number_integer() ? std::in_range<Integer>(value.get<int64_t>())
                                                : false;
  if (!fits)
    throw std::invalid_argument(what + " is " + value.dump() + ", not a whole number from " +
                                std::to_string(std::numeric_limits<Integer>::min()) + " to " +
                                std::to_string(std::numeric_limits<Integer>::max()));
  target = value.is_number_unsigned() ? static_cast<Integer>(value.get<uint64_t>())
                                      : static_cast<Integer>(value.get<int64_t>());
}

}  // namespace bareyolo
