// engine/distributed/comm/store_server.cpp — the store's server: one thread, one poll() over the
// listening socket, a wake-up pipe and every connection (protocol and invariants: store.h).
//
// Each connection is non-blocking with its own input and output buffer, so a slow or silent
// client never stalls the others; a request that cannot be served yet (GET or WAIT of a
// missing key) parks its connection, and every SET or ADD retries the parked ones.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>

#include "engine/distributed/comm/store.h"
#include "engine/distributed/comm/store_protocol.h"
#include "engine/distributed/comm/token_proof.h"

namespace bareyolo::dist {
namespace {

using namespace store_protocol;

constexpr size_t kReadChunkBytes = 1 << 16;
// Rank 0's process serves the store, and may finish first: a short job (a broadcast needs only
// rank 0's sends) can end while a slower rank still reads its ring neighbour's address from the
// store. So a stopped server goes on serving until every client has closed its connection, each
// rank's when its process group ends, for at most this long (a rank that hangs keeps rank 0
// no longer than this).
constexpr auto kLingerAfterStop = std::chrono::seconds(10);

struct Connection {
  Fd fd;
  std::string peer;                        // address:port, for messages
  std::string who;                         // what its HELLO said it is ("pid N on host H")
  std::string client_nonce, server_nonce;  // of its challenge-response, once it said HELLO
  bool greeted = false;                    // proved it holds the token
  bool closing = false;                    // close once `output` is sent
  bool dropped = false;
  std::string input;
  std::string output;
  std::optional<Frame> parked;  // a GET or WAIT that waits for a key
};

using Table = std::map<std::string, std::string, std::less<>>;

// "10.0.0.2:51234" of a peer's address.
std::string address_text(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    ::inet_ntop(AF_INET, &v4.sin_addr, host, sizeof host);
    port = ntohs(v4.sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof host);
    port = ntohs(v6.sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

std::optional<int64_t> parse_int64(std::string_view text) {
  int64_t value = 0;
  auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || stop != text.data() + text.size())
    return std::nullopt;
  return value;
}

class Server {
 public:
  Server(int listening, int wake, const std::string& token)
      : listening_(listening), wake_(wake), token_(token) {}

  // Serves until the destructor asks it to stop, then lingers (below) while clients remain.
  void run() {
    std::optional<Clock::time_point> stop_by;  // set once asked to stop
    while (!(stop_by && (connections_.empty() || Clock::now() >= *stop_by))) {
      std::vector<pollfd> polled = poll_set();
      const int wait_ms =
          stop_by ? static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(
                                         std::max(*stop_by - Clock::now(), Clock::duration(0)))
                                         .count())
                  : -1;
      if (::poll(polled.data(), polled.size(), wait_ms) < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error(errno_message("poll failed"));
      }
      if (polled[0].revents != 0) {  // the destructor's byte: read it, or poll() never sleeps
        char stop;
        while (::read(wake_, &stop, 1) < 0 && errno == EINTR) {
        }
        stop_by = Clock::now() + kLingerAfterStop;
      }
      if (polled[1].revents != 0) accept_all();
      for (size_t i = 2; i < polled.size(); ++i) {
        Connection& connection = *connections_[i - 2];
        if (polled[i].revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) read_from(connection);
        if (polled[i].revents & POLLOUT) flush(connection);
      }
      std::erase_if(connections_, [](const auto& c) { return c->dropped; });
    }
  }

 private:
  std::vector<pollfd> poll_set() const {
    std::vector<pollfd> polled{{wake_, POLLIN, 0}, {listening_, POLLIN, 0}};
    for (const auto& connection : connections_) {
      // A parked or closing connection reads no more requests, but its peer's close (POLLRDHUP)
      // still drops it: a client that gave up on a GET leaves no connection behind.
      short events = connection->parked || connection->closing ? POLLRDHUP : POLLIN;
      if (!connection->output.empty()) events |= POLLOUT;
      polled.push_back({connection->fd.get(), events, 0});
    }
    return polled;
  }

  void accept_all() {
    while (true) {
      sockaddr_storage address{};
      socklen_t length = sizeof address;
      int fd = ::accept4(listening_, reinterpret_cast<sockaddr*>(&address), &length,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN: no more; other errors: the client retries
      connections_.push_back(std::make_unique<Connection>());
      connections_.back()->fd.reset(fd);
      watch_link(fd);  // a client behind a cut link is dropped like one that closed
      limit_unacknowledged_sends(fd);
      connections_.back()->peer = address_text(address);
    }
  }

  // Reads what arrived and serves it; requests sent just before the peer closed are served
  // too (their replies are lost, their effects are not).
  void read_from(Connection& connection) {
    char chunk[kReadChunkBytes];
    bool closed = false;
    while (!closed) {
      ssize_t got = ::recv(connection.fd.get(), chunk, sizeof chunk, 0);
      if (got > 0) {
        connection.input.append(chunk, static_cast<size_t>(got));
      } else if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
        break;
      } else {  // closed by the peer, or failed
        closed = true;
      }
    }
    serve_input(connection);
    if (closed) connection.dropped = true;
  }

  // Serves every complete frame in the connection's input, until one parks it.
  void serve_input(Connection& connection) {
    while (!connection.parked && !connection.closing && connection.input.size() >= kHeaderBytes) {
      uint64_t body_bytes = read_u64(connection.input.data());
      uint64_t limit = connection.greeted ? kMaxBodyBytes : kMaxHelloBodyBytes;
      if (body_bytes > limit) return refuse(connection, "the frame is larger than allowed");
      if (connection.input.size() - kHeaderBytes < body_bytes) return;
      auto frame = decode_body(std::string_view(connection.input).substr(kHeaderBytes, body_bytes));
      connection.input.erase(0, kHeaderBytes + body_bytes);
      if (!frame) return refuse(connection, "the frame is malformed");
      if (!connection.greeted) {
        greet(connection, *frame);
      } else {
        serve_request(connection, std::move(*frame));
      }
    }
    flush(connection);
  }

  // The challenge-response of store.h: HELLO, then PROVE. A client that speaks the protocol
  // but fails its proof is a rank of this job started with another BAREYOLO_STORE_TOKEN far
  // more often than a stranger: the ranks waiting for it would wait out the whole timeout (3
  // hours), so from then on every wait that cannot be answered at once fails, naming it.
  void greet(Connection& connection, const Frame& frame) {
    if (connection.server_nonce.empty()) {
      bool valid = frame.tag == kHello && frame.fields.size() == 3 && frame.fields[0] == kMagic;
      if (!valid) return refuse(connection, "it does not speak bareyolo's store protocol");
      connection.who = frame.fields[1];
      connection.client_nonce = frame.fields[2];
      connection.server_nonce = random_nonce();
      return reply(connection, kOk, {connection.server_nonce});
    }
    if (frame.tag != kProve || frame.fields.size() != 1)
      return refuse(connection, "it did not answer the challenge");
    const std::string expected =
        token_proof(token_, "store client", connection.server_nonce, connection.client_nonce);
    if (!same_proof(frame.fields[0], expected)) {
      refused_peer_ = connection.who + " at " + connection.peer;
      refuse(connection,
             "its token differs from this run's (another run, or a stale "
             "BAREYOLO_STORE_TOKEN)");
      return serve_parked();
    }
    connection.greeted = true;
    reply(connection, kOk,
          {token_proof(token_, "store server", connection.client_nonce, connection.server_nonce)});
  }

  void refuse(Connection& connection, const std::string& reason) {
    reply(connection, kRefused, {"refused this connection: " + reason});
    connection.closing = true;
    connection.input.clear();
    flush(connection);
  }

  void serve_request(Connection& connection, Frame frame) {
    const auto& fields = frame.fields;
    bool one_key = fields.size() == 1;
    switch (frame.tag) {
      case kSet:
        if (fields.size() != 2) break;
        table_[fields[0]] = fields[1];
        reply(connection, kOk, {});
        return serve_parked();
      case kAdd:
        if (fields.size() != 2) break;
        return add(connection, fields[0], fields[1]);
      case kCheck:
        if (!one_key) break;
        if (!table_.contains(fields[0]) && !refused_peer_.empty())
          return reply(connection, kError, {refused_peer_error()});
        return reply(connection, kOk, {table_.contains(fields[0]) ? "1" : "0"});
      case kGet:
      case kWait:
        if (fields.empty() || (frame.tag == kGet && !one_key)) break;
        connection.parked = std::move(frame);
        return try_unpark(connection);
    }
    refuse(connection, "request tag " + std::to_string(frame.tag) + " with " +
                           std::to_string(fields.size()) + " fields is not in the protocol");
  }

  void add(Connection& connection, const std::string& key, const std::string& delta_text) {
    auto delta = parse_int64(delta_text);
    auto found = table_.find(key);
    auto current = found == table_.end() ? std::optional<int64_t>(0) : parse_int64(found->second);
    int64_t sum = 0;
    if (!delta || !current || __builtin_add_overflow(*current, *delta, &sum)) {
      return reply(connection, kError,
                   {"add('" + key + "', '" + delta_text +
                    "') needs an integer delta and a key that holds an integer, and a sum "
                    "within 64 bits; set() a counter only through add()"});
    }
    std::string value = std::to_string(sum);
    table_[key] = value;
    reply(connection, kOk, {value});
    serve_parked();
  }

  // Answers a parked GET or WAIT when its keys exist (or, once a client with another token
  // was refused, with an ERROR naming it), and resumes reading its input.
  void try_unpark(Connection& connection) {
    const Frame& frame = *connection.parked;
    for (const auto& key : frame.fields) {
      if (table_.contains(key)) continue;
      if (refused_peer_.empty()) return;
      reply(connection, kError, {refused_peer_error()});
      connection.parked.reset();
      return serve_input(connection);
    }
    if (frame.tag == kGet) {
      reply(connection, kOk, {table_.find(frame.fields[0])->second});
    } else {
      reply(connection, kOk, {});
    }
    connection.parked.reset();
    serve_input(connection);
  }

  // The answer to a wait for a key that a refused process may have been meant to set.
  std::string refused_peer_error() const {
    return "a process (" + refused_peer_ +
           ") presented another store token and was refused, so a rank of this job may never "
           "arrive: start every node with the same BAREYOLO_STORE_TOKEN";
  }

  void serve_parked() {
    for (auto& connection : connections_)
      if (connection->parked && !connection->dropped) try_unpark(*connection);
  }

  void reply(Connection& connection, uint8_t tag, const std::vector<std::string_view>& fields) {
    connection.output += encode_frame(tag, fields);
  }

  // Sends what the socket takes now; the rest waits for POLLOUT.
  void flush(Connection& connection) {
    while (!connection.output.empty()) {
      ssize_t sent = ::send(connection.fd.get(), connection.output.data(), connection.output.size(),
                            MSG_NOSIGNAL);
      if (sent < 0 && (errno == EAGAIN || errno == EINTR)) return;
      if (sent <= 0) {
        connection.dropped = true;
        return;
      }
      connection.output.erase(0, static_cast<size_t>(sent));
    }
    if (connection.closing) connection.dropped = true;
  }

  int listening_;
  int wake_;
  const std::string& token_;
  std::string refused_peer_;  // who presented another token: "" while nobody did
  Table table_;
  std::vector<std::unique_ptr<Connection>> connections_;
};

}  // namespace

std::string store_bind_host(std::string_view master_addr) {
  bool loopback = master_addr.empty() || master_addr == "localhost" ||
                  master_addr.starts_with("127.") || master_addr == "::1";
  return loopback ? "127.0.0.1" : "0.0.0.0";
}

StoreServer::StoreServer(const std::string& host, int port, std::string token)
    : StoreServer(listen_tcp(host, port), std::move(token)) {}

StoreServer::StoreServer(Fd listening_socket, std::string token)
    : listening_(std::move(listening_socket)), token_(std::move(token)) {
  port_ = bound_port(listening_.get());
  int flags = ::fcntl(listening_.get(), F_GETFL);
  if (flags < 0 || ::fcntl(listening_.get(), F_SETFL, flags | O_NONBLOCK) != 0)
    throw std::runtime_error(errno_message("the store's listening socket is not usable"));
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error(errno_message("cannot create the store's wake-up pipe"));
  wake_read_.reset(pipe_fds[0]);
  wake_write_.reset(pipe_fds[1]);
  thread_ = std::thread([this] { serve(); });
}

StoreServer::~StoreServer() {
  char stop = 1;
  while (::write(wake_write_.get(), &stop, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
}

void StoreServer::serve() {
  try {
    Server(listening_.get(), wake_read_.get(), token_).run();
  } catch (const std::exception& error) {
    // Clients see the store vanish and time out naming it; say why here.
    std::fprintf(stderr, "bareyolo: the rendezvous store on port %d stopped: %s\n", port_,
                 error.what());
  }
}

}  // namespace bareyolo::dist
