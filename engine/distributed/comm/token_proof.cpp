// engine/distributed/comm/token_proof.cpp — see token_proof.h.
#include "engine/distributed/comm/token_proof.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdint>
#include <stdexcept>

namespace bareyolo::dist {

namespace {

std::string hex(const unsigned char* bytes, size_t count) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < count; ++i) {
    text += kDigits[bytes[i] >> 4];
    text += kDigits[bytes[i] & 15];
  }
  return text;
}

void append_field(std::string& message, std::string_view field) {
  const uint64_t size = field.size();
  for (int byte = 0; byte < 8; ++byte) message += static_cast<char>((size >> (8 * byte)) & 0xff);
  message += field;
}

}  // namespace

std::string random_nonce() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1)
    throw std::runtime_error("the system's random number generator failed (RAND_bytes)");
  return hex(bytes, sizeof bytes);
}

std::string token_proof(std::string_view token, std::string_view label, std::string_view first,
                        std::string_view second) {
  std::string message;
  append_field(message, label);
  append_field(message, first);
  append_field(message, second);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_bytes = 0;
  if (HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest,
           &digest_bytes) == nullptr)
    throw std::runtime_error("HMAC-SHA256 failed (libcrypto)");
  return hex(digest, digest_bytes);
}

bool same_proof(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace bareyolo::dist
