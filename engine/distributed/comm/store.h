// engine/distributed/comm/store.h — the rendezvous store: a small TCP key/value server that rank 0
// runs on a background thread, and the client every rank (rank 0 included) talks to it with. Ranks
// publish their addresses and the NCCL unique id here, and count arrivals with add() to build
// barriers.
//
// Protocol (every integer little-endian). A frame is
//     u64 body_bytes | u8 tag | fields...      each field: u64 bytes | bytes
// Client -> server: a connection opens with a challenge-response that never sends the token
// (token_proof.h):
//     HELLO {magic, who, client nonce} -> OK {server nonce}
//     PROVE {HMAC(token, "store client", server nonce, client nonce)}
//         -> OK {HMAC(token, "store server", client nonce, server nonce)}
// so each side proves it holds the job's token, over nonces fresh to this connection (a
// recorded exchange is worth nothing later). bareyolo's store answers the HELLO at once: a
// listener that does not within kHandshakeTimeout, or answers with bytes outside the protocol,
// is another program on the port, and the client fails at once, naming the address. "who" ("pid N
// on host H") names the client in messages. Anything else is answered REFUSED {reason} and the
// connection closed — a stranger (wrong token, another protocol, a port scanner) costs the server
// one closed socket, never a crash or a hang. Once a client that speaks the protocol fails its
// proof (most often a node started with another BAREYOLO_STORE_TOKEN), every GET or WAIT that
// cannot be answered at once (and every CHECK of a missing key) is answered ERROR naming that
// client and its address, so the ranks waiting for a rank that will never arrive fail within
// seconds, not at the timeout. Then one
// request at a time, each answered by one reply:
//     SET {key, value} -> OK          GET {key} -> OK {value}, sent once the key exists
//     WAIT {key...} -> OK, once all exist         CHECK {key} -> OK {"1" | "0"}
//     ADD {key, decimal delta} -> OK {decimal new value}   (a missing key counts as 0)
// A request the server cannot serve (ADD to a key that holds no integer) is answered
// ERROR {sentence}; a frame outside the protocol is answered REFUSED and the connection closed.
//
// Invariants: the server alone touches the table, from its one thread, so SET and ADD are
// atomic without locks; a GET or WAIT parks its connection until a SET or ADD makes it
// servable. Frames are at most 64 MiB (4 KiB before the HELLO), on both sides: no length read
// from the wire makes either allocate more. Every blocking client call ends by its timeout
// with a std::runtime_error naming what it waited for, the store's address and the seconds; after a
// timeout the client drops its connection (the server may still answer the abandoned request) and
// reconnects on its next call.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/distributed/comm/socket.h"
#include "engine/distributed/comm/store_protocol.h"

namespace bareyolo::dist {

inline constexpr std::chrono::milliseconds kDefaultStoreTimeout = std::chrono::hours(3);
// How long a client waits for the answer to its HELLO before it calls the listener foreign
// (unless told otherwise: see Store's constructor).
inline constexpr std::chrono::milliseconds kHandshakeTimeout = std::chrono::seconds(5);

// Thrown by Store's constructor when nothing accepted a connection at host:port by its connect
// deadline: rank 0 may not be up yet, and a caller with time left may try again.
class StoreUnreachable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The address the store binds for a given MASTER_ADDR: loopback when the master is this
// machine's loopback name ("", "localhost", 127.x.x.x), every interface (0.0.0.0) otherwise —
// the other nodes must reach it, and the token keeps strangers out.
std::string store_bind_host(std::string_view master_addr);

class StoreServer {
 public:
  // Binds host:port (port 0: the OS picks one; see port()) and starts serving.
  StoreServer(const std::string& host, int port, std::string token);
  // Serves on an already bound and listening socket and takes ownership of it: the launcher
  // binds port 0 before forking, so no other process can take the port in between.
  StoreServer(Fd listening_socket, std::string token);
  // Stops the serving thread, joins it and closes every connection: first it serves on until
  // every client has closed its own connection, for at most 10 s (rank 0, whose process serves
  // the store, may finish before a slower rank has read what it needs from it).
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  int port() const { return port_; }

 private:
  void serve();

  Fd listening_;
  Fd wake_read_, wake_write_;  // a byte on this pipe tells serve() to return
  std::string token_;
  int port_ = 0;
  std::thread thread_;
};

// One connection to the store; not thread-safe (one Store per thread or per rank).
class Store {
 public:
  // Connects to the server at host:port, retrying until `timeout` (the server may start
  // later), and presents `token`.
  Store(std::string host, int port, std::string token,
        std::chrono::milliseconds timeout = kDefaultStoreTimeout);
  // The same, retrying the connection only until `connect_by` (StoreUnreachable after it);
  // `timeout` still bounds every later call. A listener that does not answer the HELLO within
  // `handshake_timeout` is foreign; a caller that knows the listening socket is its store's
  // (bound before the store started serving) may wait longer.
  Store(std::string host, int port, std::string token, std::chrono::milliseconds timeout,
        Clock::time_point connect_by,
        std::chrono::milliseconds handshake_timeout = kHandshakeTimeout);

  void set(const std::string& key, std::string_view value);
  // The value of `key`, waiting until some client sets it.
  std::string get(const std::string& key);
  // Returns once every key exists.
  void wait(const std::vector<std::string>& keys);
  // Adds `delta` to the counter `key` (missing: 0) and returns the new value, atomically.
  int64_t add(const std::string& key, int64_t delta);
  // Whether `key` exists now; never waits for it.
  bool check(const std::string& key);

  // The bound of every call (connection, request and reply), set at construction.
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  // Sends one request and returns the reply's payload, within `limit` (the store's timeout by
  // default); `waiting_for` names it in errors, which give the limit (not the time measured,
  // which a loaded machine stretches past it). Connects first when the connection was
  // dropped. Any failure but an ERROR reply drops it.
  std::string request(uint8_t tag, const std::vector<std::string_view>& fields,
                      const std::string& waiting_for);
  std::string request(uint8_t tag, const std::vector<std::string_view>& fields,
                      const std::string& waiting_for, std::chrono::milliseconds limit);
  // Sends `frame` and reads the reply, by `deadline`; nullopt when none came by then. Throws
  // when the bytes that came are not a reply of the protocol, or the connection broke.
  std::optional<store_protocol::Frame> exchange(const std::string& frame,
                                                Clock::time_point deadline);
  void connect(Clock::time_point deadline);
  // The HELLO, answered by the server's challenge, or an error saying the listener is foreign.
  std::string greeting(const std::string& client_nonce);
  std::string address() const;

  std::string host_;
  int port_;
  std::string token_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds handshake_timeout_ = kHandshakeTimeout;
  Fd socket_;
};

}  // namespace bareyolo::dist
