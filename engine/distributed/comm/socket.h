// engine/distributed/comm/socket.h — the POSIX TCP calls the distributed runtime makes, each
// checked and each bounded by a deadline.
//
// Invariants: a file descriptor has exactly one owner (Fd closes it once); no call here
// blocks past its deadline; a peer that vanishes is an exception naming the peer, never a
// SIGPIPE (sends use MSG_NOSIGNAL); a connection whose peer falls silent (a cut link) while
// this side waits for it fails within kLinkLossTimeout, whatever the caller's deadline
// (watch_link). IPv4 only.
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
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

// How long a connection may go without a word from its peer (data, or the acknowledgement of
// a keepalive probe or of data) while this side waits for one, before it counts as lost. A live
// peer's kernel answers even while its process is stopped or stuck (that is the stall
// detector's case, not this one), and a slow but working path (20 ms delay, 1% loss) answers
// within a retransmission or two: 8 s of silence there needs one probe or segment, or its
// acknowledgement, lost six times in a row. So it means the path is gone (a cut link, a host
// that is down), and a job still ends within seconds of it.
inline constexpr std::chrono::seconds kLinkLossTimeout{8};

// "PEER unreachable: no TCP acknowledgement for 8 s — the network link was cut or the host is
// down": what a socket that failed with ETIMEDOUT means, once watch_link set it up.
std::string link_lost_message(const std::string& peer);

// The peer of a connection was silent for kLinkLossTimeout; what() names it.
class LinkLost : public std::runtime_error {
 public:
  explicit LinkLost(const std::string& peer) : std::runtime_error(link_lost_message(peer)) {}
};

// "what: strerror(errno)" for the current errno.
std::string errno_message(const std::string& what);

// A listening socket bound to host:port (port 0: the OS picks; read it with bound_port).
Fd listen_tcp(const std::string& host, int port);
int bound_port(int fd);

// Keepalive on the connected socket `fd`: once nothing has come from the peer for 2 s, probes
// go out every second, and when none is answered by kLinkLossTimeout the socket fails with
// ETIMEDOUT. Linux probes only while this side has no data of its own unacknowledged or queued,
// which is when it waits for the peer. connect_tcp does it; the accepting sides call it on
// each accepted socket.
void watch_link(int fd);

// TCP_USER_TIMEOUT on `fd`: data this side sent that stays unacknowledged for kLinkLossTimeout
// fails the socket with ETIMEDOUT — a request in flight when the link is cut. Only for a peer
// that reads at once whenever its process runs, in small messages (the store's requests and
// replies). Linux applies the same limit to a peer whose receive window stays shut: on a
// stream to a rank that is stopped or busy, the sender would take the full window for a lost
// link (measured: a peer that never reads failed the sender's socket just past the limit).
void limit_unacknowledged_sends(int fd);

// Connects to host:port, retrying while the peer is not listening yet, until `deadline`.
// Throws naming the peer and the seconds waited. The socket is watched (watch_link).
Fd connect_tcp(const std::string& host, int port, Clock::time_point deadline);

// Is the connected socket `fd` connected to itself? On loopback, a connect to a port nobody
// listens on yet may be given that very port as its own ephemeral port, and TCP's simultaneous
// open then connects the socket to itself: a rank would read its own hello back as the
// store's answer. connect_tcp treats such a connection as refused and retries.
bool is_self_connection(int fd);

// Sends or receives exactly `bytes`, waiting at most until `deadline`. Return false on the
// deadline; throw when the peer closes or the socket fails (`peer` names it in the message),
// LinkLost when the link was lost.
bool send_all(int fd, const void* data, size_t bytes, Clock::time_point deadline,
              const std::string& peer);
bool recv_all(int fd, void* data, size_t bytes, Clock::time_point deadline,
              const std::string& peer);

// Seconds as text for messages ("0.2 s", "10800 s").
std::string seconds_text(std::chrono::milliseconds duration);

}  // namespace bareyolo::dist
