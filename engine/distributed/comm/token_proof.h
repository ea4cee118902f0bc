// engine/distributed/comm/token_proof.h — proving knowledge of a job's token without sending
// it. The store's HELLO and the TCP ring's hello carry HMAC-SHA256(token, message) over fresh
// random nonces (a challenge), never the token: a process that sees the traffic learns
// nothing it could present to another job, or later. HMAC and the nonces come from OpenSSL's
// libcrypto (HMAC, RAND_bytes), compared in constant time (CRYPTO_memcmp).
#pragma once

#include <string>
#include <string_view>

namespace bareyolo::dist {

// 16 bytes from libcrypto's CSPRNG, as 32 hex characters.
std::string random_nonce();

// HMAC-SHA256 keyed by `token` of `label`, `first` and `second` (each length-prefixed, so no
// two different triples share a message), as 64 hex characters. `label` says who proves what
// ("store client", "store server", "ring"), so a proof of one kind never passes for another.
std::string token_proof(std::string_view token, std::string_view label, std::string_view first,
                        std::string_view second);

// Whether two proofs are equal, in time that does not depend on where they differ.
bool same_proof(std::string_view a, std::string_view b);

}  // namespace bareyolo::dist
