// tools/bareyolo/validators.h — option checks whose errors read as sentences. CLI11's
// PositiveNumber and NonNegativeNumber name their upper bound, DBL_MAX, in 309 digits
// ("Value 0 not in range 0.000000 to 17976931348623157..."); these say what is allowed.
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace bareyolo::cli {

// A number above `floor` (or at least it, when `inclusive`), and optionally the value `also`.
inline CLI::Validator number_check(double floor, bool inclusive, const std::string& words,
                                   std::optional<double> also = std::nullopt) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        const bool number =
            !text.empty() && end == text.c_str() + text.size() && std::isfinite(value);
        if (number && also && value == *also) return "";
        if (number && (inclusive ? value >= floor : value > floor)) return "";
        return "must be " + words + ", got '" + text + "'";
      },
      "", "");
}

inline const CLI::Validator kPositive = number_check(0, false, "a positive number");
inline const CLI::Validator kNonNegative = number_check(0, true, "a number >= 0");
// --batch of train: a global batch, or -1 for AutoBatch.
inline const CLI::Validator kBatchOrAuto =
    number_check(0, false, "a positive number or -1 (AutoBatch)", -1.0);

// --max-steps of train: 0 would mean "no limit" to the C++ API, so the flag takes only a
// positive count and its absence means no limit.
inline const CLI::Validator kPositiveSteps = number_check(
    0, false, "a positive number of optimizer steps (leave the flag out for no limit)");

// One of `choices`, said in words rather than as CLI11's "tape not in {ram,disk}".
inline CLI::Validator one_of(const std::vector<std::string>& choices) {
  std::string listed;
  for (const std::string& choice : choices) listed += (listed.empty() ? "" : ", ") + choice;
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        for (const std::string& choice : choices)
          if (text == choice) return "";
        return "must be one of " + listed + ", got '" + text + "'";
      },
      "{" + listed + "}", "");
}

}  // namespace bareyolo::cli
