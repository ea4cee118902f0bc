// engine/distributed/comm/socket.h — the POSIX TCP calls the distributed runtime makes, each
// checked and each bounded by a deadline.
//
// Invariants: a file descriptor has exactly one owner (Fd closes it once); no call here
// blocks past its deadline; a peer that vanishes is an exception naming the peer, never a
// SIGPIPE (sends use MSG_NOSIGNAL). IPv4 only.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace bareyolo::dist {

using Clock = std::chrono::steady_clock;

// Owns one file descriptor; move-only; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// "what: strerror(errno)" for the current errno.
std::string errno_message(const std::string& what);

// A listening socket bound to host:port (port 0: the OS picks; read it with bound_port).
Fd listen_tcp(const std::string& host, int port);
int bound_port(int fd);

// Connects to host:port, retrying while the peer is not listening yet, until `deadline`.
// Throws naming the peer and the seconds waited.
Fd connect_tcp(const std::string& host, int port, Clock::time_point deadline);

// Is the connected socket `fd` connected to itself? On loopback, a connect to a port nobody
// listens on yet may be given that very port as its own ephemeral port, and TCP's simultaneous
// open then connects the socket to itself: a rank would read its own hello back as the
// store's answer. connect_tcp treats such a connection as refused and retries.
bool is_self_connection(int fd);

// Sends or receives exactly `bytes`, waiting at most until `deadline`. Return false on the
// deadline; throw when the peer closes or the socket fails (`peer` names it in the message).
bool send_all(int fd, const void* data, size_t bytes, Clock::time_point deadline,
              const std::string& peer);
bool recv_all(int fd, void* data, size_t bytes, Clock::time_point deadline,
              const std::string& peer);

// Seconds as text for messages ("0.2 s", "10800 s").
std::string seconds_text(std::chrono::milliseconds duration);

}  // namespace bareyolo::dist
