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
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>

#include "engine/distributed/comm/store.h"
#include "engine/distributed/comm/store_service.h"

namespace bareyolo::dist {
namespace {

constexpr size_t kReadChunkBytes = 1 << 16;
// Rank 0's process serves the store, and may finish first: a short job (a broadcast needs only
// rank 0's sends) can end while a slower rank still reads its ring neighbour's address from the
// store. So a stopped server goes on serving until every client has closed its connection, each
// rank's when its process group ends, for at most this long (a rank that hangs keeps rank 0
// no longer than this).
constexpr auto kLingerAfterStop = std::chrono::seconds(10);

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

class Server {
 public:
  Server(int listening, int wake, const std::string& token)
      : listening_(listening), wake_(wake), service_(token) {}

  // Serves until the destructor asks it to stop, then lingers (below) while clients remain.
  void run() {
    std::optional<Clock::time_point> stop_by;  // set once asked to stop
    while (!(stop_by && (service_.connections().empty() || Clock::now() >= *stop_by))) {
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
      for (size_t i = 2; i < polled.size(); ++i)
        if (polled[i].revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))
          read_from(*service_.connections()[i - 2]);
      // Serving one connection may answer others (a SET for a parked GET): flush them all.
      for (const auto& connection : service_.connections())
        if (!connection->dropped && (!connection->output.empty() || connection->closing))
          flush(*connection);
      std::erase_if(service_.connections(), [](const auto& c) { return c->dropped; });
    }
  }

 private:
  std::vector<pollfd> poll_set() const {
    std::vector<pollfd> polled{{wake_, POLLIN, 0}, {listening_, POLLIN, 0}};
    for (const auto& connection : service_.connections()) {
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
      service_.connections().push_back(std::make_unique<StoreConnection>());
      service_.connections().back()->fd.reset(fd);
      watch_link(fd);  // a client behind a cut link is dropped like one that closed
      limit_unacknowledged_sends(fd);
      service_.connections().back()->peer = address_text(address);
    }
  }

  // Reads what arrived and serves it; requests sent just before the peer closed are served
  // too (their replies are lost, their effects are not).
  void read_from(StoreConnection& connection) {
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
    service_.serve_input(connection);
    if (closed) connection.dropped = true;
  }

  // Sends what the socket takes now; the rest waits for POLLOUT.
  void flush(StoreConnection& connection) {
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
  StoreService service_;  // the table and the protocol; it holds the connections
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
