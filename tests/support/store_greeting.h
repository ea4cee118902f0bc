// tests/support/store_greeting.h — a client's side of the store's challenge-response, played
// against a StoreService in memory (no sockets): what the store's unit tests and its fuzz target
// (fuzz/store_requests.cpp) do before they send requests.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "engine/distributed/comm/store_service.h"
#include "engine/distributed/comm/token_proof.h"

namespace bareyolo::dist {

// Sends HELLO and PROVE on `connection` as a client holding `token` does; throws when the
// service does not accept it. The replies are consumed: `output` is left empty.
inline void greet_with_token(StoreService& service, StoreConnection& connection,
                             std::string_view token) {
  using namespace store_protocol;
  const std::string client_nonce = "test-client-nonce";
  connection.input += encode_frame(kHello, {kMagic, "test client", client_nonce});
  service.serve_input(connection);
  const auto challenge = decode_body(std::string_view(connection.output).substr(kHeaderBytes));
  if (!challenge || challenge->tag != kOk || challenge->fields.size() != 1)
    throw std::logic_error("the store did not answer HELLO with a challenge");
  connection.input += encode_frame(
      kProve, {token_proof(token, "store client", challenge->fields[0], client_nonce)});
  service.serve_input(connection);
  if (!connection.greeted) throw std::logic_error("the store refused the token's proof");
  connection.output.clear();
}

}  // namespace bareyolo::dist
