// engine/distributed/comm/collective_fingerprint.cpp — see collective_fingerprint.h.
#include "engine/distributed/comm/collective_fingerprint.h"

namespace bareyolo::dist {
namespace {

// 1234560 -> "1,234,560": counts of gradient buckets are read, not parsed. The magnitude is
// negated as unsigned: a count off the wire may be INT64_MIN, whose negation is no int64_t.
std::string with_thousands_separators(int64_t value) {
  const uint64_t magnitude = value < 0 ? 0 - static_cast<uint64_t>(value) : uint64_t(value);
  const std::string digits = std::to_string(magnitude);
  std::string grouped;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return value < 0 ? "-" + grouped : grouped;
}

// "float", "double", ... as a reader counts them.
std::string element_noun(DType dtype, int64_t count) {
  const std::string noun = dtype == DType::f32    ? "float"
                           : dtype == DType::f64  ? "double"
                           : dtype == DType::i64  ? "int64"
                           : dtype == DType::bf16 ? "bf16 value"
                                                  : std::string(dtype_name(dtype)) + " value";
  return count == 1 ? noun : noun + "s";
}

}  // namespace

const char* to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_reduce:
      return "all_reduce";
    case CollectiveOp::broadcast:
      return "broadcast";
    case CollectiveOp::all_gather:
      return "all_gather";
    case CollectiveOp::barrier:
      return "barrier";
  }
  return "?";
}

std::string to_string(const CollectiveFingerprint& collective) {
  std::string text =
      std::string(to_string(collective.op)) + " #" + std::to_string(collective.sequence);
  if (!collective.tag.empty()) text += " " + collective.tag;
  if (collective.op != CollectiveOp::barrier) {
    text += " (" + with_thousands_separators(collective.count) + " " +
            element_noun(collective.dtype, collective.count) + ")";
  }
  return text;
}

std::string issued_differently(int rank_a, const CollectiveFingerprint& a, int rank_b,
                               const CollectiveFingerprint& b) {
  return "rank " + std::to_string(rank_a) + " issued " + to_string(a) + " where rank " +
         std::to_string(rank_b) + " issued " + to_string(b) + kSameCollectivesRule;
}

}  // namespace bareyolo::dist
