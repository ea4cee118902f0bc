// engine/distributed/comm/store_protocol.h — the store's wire format, shared by its server and
// client (the protocol itself is described in store.h). Internal to engine/distributed/comm.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bareyolo::dist::store_protocol {

enum Tag : uint8_t {
  kHello = 1,
  kSet,
  kGet,
  kWait,
  kCheck,
  kAdd,
  kProve,
  kOk = 100,
  kRefused,
  kError,
};

inline constexpr std::string_view kMagic = "bareyolo-store-3";  // HELLO {magic, who, nonce}
inline constexpr size_t kHeaderBytes = 8;
// Bounds on a body: a stranger must not make the server allocate much before it has shown
// the token, and nobody may make it allocate without bound.
inline constexpr uint64_t kMaxHelloBodyBytes = 4096;
inline constexpr uint64_t kMaxBodyBytes = uint64_t{64} << 20;  // far above any key or value

struct Frame {
  uint8_t tag = 0;
  std::vector<std::string> fields;
};

inline void append_u64(std::string& out, uint64_t value) {
  for (int byte = 0; byte < 8; ++byte) out += static_cast<char>((value >> (8 * byte)) & 0xff);
}

inline uint64_t read_u64(const char* bytes) {
  uint64_t value = 0;
  for (int byte = 7; byte >= 0; --byte) value = (value << 8) | static_cast<uint8_t>(bytes[byte]);
  return value;
}

// Header and body of one frame.
inline std::string encode_frame(uint8_t tag, const std::vector<std::string_view>& fields) {
  uint64_t body_bytes = 1;
  for (std::string_view field : fields) body_bytes += 8 + field.size();
  std::string frame;
  frame.reserve(kHeaderBytes + body_bytes);
  append_u64(frame, body_bytes);
  frame += static_cast<char>(tag);
  for (std::string_view field : fields) {
    append_u64(frame, field.size());
    frame += field;
  }
  return frame;
}

// The frame in `body` (the bytes after the header), or nullopt when it is malformed.
inline std::optional<Frame> decode_body(std::string_view body) {
  if (body.empty()) return std::nullopt;
  Frame frame;
  frame.tag = static_cast<uint8_t>(body[0]);
  size_t at = 1;
  while (at < body.size()) {
    if (body.size() - at < 8) return std::nullopt;
    uint64_t bytes = read_u64(body.data() + at);
    at += 8;
    if (bytes > body.size() - at) return std::nullopt;
    frame.fields.emplace_back(body.substr(at, bytes));
    at += bytes;
  }
  return frame;
}

}  // namespace bareyolo::dist::store_protocol
