// fuzz/store_requests.cpp — fuzz target: the rendezvous store server's side of the wire protocol
// (engine/distributed/comm/store_service.h), two clients' bytes in any interleaving.
//
// Input: one byte of flags (bit k: client k proves the token first, as a rank does, so that
// the requests after the handshake are reached too), then chunks, each one byte (bit 0: the
// client; bits 1-7: the chunk's length) and the bytes that client sends next.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/distributed/comm/store_service.h"
#include "tests/support/store_greeting.h"

namespace {

using namespace bareyolo::dist;

constexpr const char* kToken = "fuzz-token";

// What the server's socket loop does after serving: send the output, close a closing client.
void flush(StoreService& service) {
  for (const auto& connection : service.connections()) {
    connection->output.clear();
    if (connection->closing) connection->dropped = true;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  StoreService service(kToken);
  for (int client = 0; client < 2; ++client) {
    service.connections().push_back(std::make_unique<StoreConnection>());
    service.connections().back()->peer = "client " + std::to_string(client);
    if (data[0] & (1 << client)) greet_with_token(service, *service.connections().back(), kToken);
  }
  for (size_t at = 1; at < size;) {
    StoreConnection& connection = *service.connections()[data[at] & 1];
    const size_t bytes = std::min<size_t>(data[at] >> 1, size - at - 1);
    if (!connection.dropped) {
      connection.input.append(reinterpret_cast<const char*>(data + at + 1), bytes);
      service.serve_input(connection);
      flush(service);
    }
    at += 1 + bytes;
  }
  return 0;
}
