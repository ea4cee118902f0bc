// engine/distributed/comm/store_service.h — the store's server without its sockets: the table,
// the challenge-response and the requests, from the bytes each connection sent to the bytes to
// send back (protocol and invariants: store.h). store_server.cpp moves the bytes; everything a
// client's bytes can reach is here, so that the fuzzer (fuzz/store_requests.cpp) reaches it too.
// Internal to engine/distributed/comm.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/distributed/comm/socket.h"
#include "engine/distributed/comm/store_protocol.h"

namespace bareyolo::dist {

struct StoreConnection {
  Fd fd;                                        // the server's; never used here
  std::string peer;                             // address:port, for messages
  std::string who;                              // what its HELLO said it is ("pid N on host H")
  std::string client_nonce, server_nonce;       // of its challenge-response, once it said HELLO
  bool greeted = false;                         // proved it holds the token
  bool closing = false;                         // close once `output` is sent
  bool dropped = false;                         // gone: the server erases it
  std::string input;                            // received, not yet served
  std::string output;                           // to send
  std::optional<store_protocol::Frame> parked;  // a GET or WAIT that waits for a key
};

class StoreService {
 public:
  explicit StoreService(std::string token) : token_(std::move(token)) {}

  // The connections, in the order they came; the server adds and erases them.
  std::vector<std::unique_ptr<StoreConnection>>& connections() { return connections_; }
  const std::vector<std::unique_ptr<StoreConnection>>& connections() const { return connections_; }

  // Serves every complete frame in `connection.input`, until one parks or closes it. Replies
  // go to the `output` of this connection and of any parked one a SET or ADD makes servable.
  void serve_input(StoreConnection& connection);

 private:
  void greet(StoreConnection& connection, const store_protocol::Frame& frame);
  void refuse(StoreConnection& connection, const std::string& reason);
  void serve_request(StoreConnection& connection, store_protocol::Frame frame);
  void add(StoreConnection& connection, const std::string& key, const std::string& delta_text);
  // Answers a parked GET or WAIT when its keys exist (or, once a client with another token was
  // refused, with an ERROR naming it); true when it did, and the connection is parked no more.
  bool answer_parked(StoreConnection& connection);
  void serve_parked();
  // The answer to a wait for a key that a refused process may have been meant to set.
  std::string refused_peer_error() const;

  std::string token_;
  std::string refused_peer_;  // who presented another token: "" while nobody did
  std::map<std::string, std::string, std::less<>> table_;
  std::vector<std::unique_ptr<StoreConnection>> connections_;
};

}  // namespace bareyolo::dist
