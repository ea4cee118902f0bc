// engine/distributed/comm/socket.cpp — checked, deadline-bounded TCP calls (invariants: socket.h).
// Every socket here is non-blocking and close-on-exec; waiting is done in poll().
#include "engine/distributed/comm/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace bareyolo::dist {
namespace {

constexpr int kListenBacklog = 128;
// Keepalive probes start after this much silence from the peer and repeat at this interval;
// as many go out as fit in kLinkLossTimeout.
constexpr int kKeepaliveIdleSeconds = 2;
constexpr int kKeepaliveIntervalSeconds = 1;
constexpr auto kFirstRetryDelay = std::chrono::milliseconds(5);
constexpr auto kLongestRetryDelay = std::chrono::milliseconds(200);

std::string peer_text(const std::string& host, int port) {
  return host + ":" + std::to_string(port);
}

sockaddr_in resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    throw std::runtime_error("cannot resolve host '" + host + "': " + ::gai_strerror(rc) +
                             " (check MASTER_ADDR)");
  }
  sockaddr_in address = *reinterpret_cast<sockaddr_in*>(found->ai_addr);
  ::freeaddrinfo(found);
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

Fd new_socket() {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw std::runtime_error(errno_message("cannot create a TCP socket"));
  return fd;
}

int milliseconds_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 1 << 30));
}

// Waits for `events` on fd; false when the deadline passes first.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd entry{fd, events, 0};
    int rc = ::poll(&entry, 1, milliseconds_until(deadline));
    if (rc > 0) return true;
    if (rc == 0 && Clock::now() >= deadline) return false;
    if (rc < 0 && errno != EINTR) throw std::runtime_error(errno_message("poll failed"));
  }
}

// One connection attempt; returns the errno that made it fail (0 on success). A socket
// connected to itself counts as refused: nobody was listening.
int try_connect(const Fd& fd, const sockaddr_in& address, Clock::time_point deadline) {
  int error = 0;
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    if (errno != EINPROGRESS) return errno;
    if (!wait_for(fd.get(), POLLOUT, deadline)) return ETIMEDOUT;
    socklen_t length = sizeof error;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
  }
  if (error == 0 && is_self_connection(fd.get())) return ECONNREFUSED;
  return error;
}

}  // namespace

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string errno_message(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string seconds_text(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(duration.count()) / 1000.0);
  return text;
}

std::string link_lost_message(const std::string& peer) {
  return peer + " unreachable: no TCP acknowledgement for " + seconds_text(kLinkLossTimeout) +
         " — the network link was cut or the host is down";
}

void watch_link(int fd) {
  const int yes = 1, idle = kKeepaliveIdleSeconds, interval = kKeepaliveIntervalSeconds;
  const int probes = static_cast<int>(kLinkLossTimeout.count() - idle) / interval;
  if (::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &yes, sizeof yes) != 0 ||
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) != 0 ||
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval) != 0 ||
      ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes) != 0)
    throw std::runtime_error(errno_message("cannot turn on TCP keepalive"));
}

void limit_unacknowledged_sends(int fd) {
  const unsigned int limit_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(kLinkLossTimeout).count();
  if (::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &limit_ms, sizeof limit_ms) != 0)
    throw std::runtime_error(errno_message("cannot set TCP_USER_TIMEOUT"));
}

Fd listen_tcp(const std::string& host, int port) {
  sockaddr_in address = resolve(host, port);
  Fd fd = new_socket();
  int yes = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    throw std::runtime_error(errno_message("cannot bind the store to " + peer_text(host, port)) +
                             " (another process may hold the port: choose another MASTER_PORT)");
  }
  if (::listen(fd.get(), kListenBacklog) != 0)
    throw std::runtime_error(errno_message("cannot listen on " + peer_text(host, port)));
  return fd;
}

int bound_port(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw std::runtime_error(errno_message("getsockname failed on the store's socket"));
  return ntohs(address.sin_port);
}

bool is_self_connection(int fd) {
  sockaddr_in local{}, peer{};
  socklen_t local_length = sizeof local, peer_length = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0)
    return false;
  return local.sin_port == peer.sin_port && local.sin_addr.s_addr == peer.sin_addr.s_addr;
}

Fd connect_tcp(const std::string& host, int port, Clock::time_point deadline) {
  const Clock::time_point start = Clock::now();
  auto delay = kFirstRetryDelay;
  int last_error = 0;
  do {
    Fd fd = new_socket();
    last_error = try_connect(fd, resolve(host, port), deadline);
    if (last_error == 0) {
      int yes = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
      watch_link(fd.get());
      return fd;
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(delay, deadline - Clock::now()));
    delay = std::min(delay * 2, kLongestRetryDelay);
  } while (Clock::now() < deadline);
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  throw std::runtime_error("cannot connect to the store at " + peer_text(host, port) + " after " +
                           seconds_text(waited) + " (last error: " + std::strerror(last_error) +
                           "): is rank 0 running, and are MASTER_ADDR/MASTER_PORT the same "
                           "on every rank?");
}

bool send_all(int fd, const void* data, size_t bytes, Clock::time_point deadline,
              const std::string& peer) {
  const char* next = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t sent = ::send(fd, next, bytes, MSG_NOSIGNAL);
    if (sent > 0) {
      next += sent;
      bytes -= static_cast<size_t>(sent);
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!wait_for(fd, POLLOUT, deadline)) return false;
    } else if (errno == ETIMEDOUT) {
      throw LinkLost(peer);
    } else {
      throw std::runtime_error(errno_message("lost the connection to " + peer + " while sending"));
    }
  }
  return true;
}

bool recv_all(int fd, void* data, size_t bytes, Clock::time_point deadline,
              const std::string& peer) {
  char* next = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t got = ::recv(fd, next, bytes, 0);
    if (got > 0) {
      next += got;
      bytes -= static_cast<size_t>(got);
    } else if (got == 0) {
      throw std::runtime_error(peer + " closed the connection");
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!wait_for(fd, POLLIN, deadline)) return false;
    } else if (errno == ETIMEDOUT) {
      throw LinkLost(peer);
    } else {
      throw std::runtime_error(
          errno_message("lost the connection to " + peer + " while receiving"));
    }
  }
  return true;
}

}  // namespace bareyolo::dist
