// tests/support/link_relay/link_relay.cpp — a degraded network link between two network
// namespaces, in user space (for a kernel without netem; tests/shell/degraded_link.sh).
//
//   link_relay NETNS_A TUN_A NETNS_B TUN_B DELAY_MS LOSS_PERCENT [SEED]
//
// Creates TUN interface TUN_A in namespace NETNS_A and TUN_B in NETNS_B (/proc/PID/ns/net
// paths), prints "link relay: ready", and from then on moves every IP packet either kernel
// routes into its interface to the other one, each direction with DELAY_MS of delay and
// LOSS_PERCENT % of its packets dropped at random. Whole packets are lost, as on a real lossy
// link, so TCP above retransmits them. On SIGTERM or SIGINT it prints what each direction
// carried and lost, and exits 0. Exit status 77: this machine will not make TUN devices (a test
// reports itself skipped); 2: bad arguments; 1: anything else.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/support/link_relay/delay_line.h"
#include "tests/support/link_relay/tun_device.h"

namespace {

using link_relay::Clock;
using link_relay::DelayLine;
using link_relay::TunDevice;

volatile sig_atomic_t stop_requested = 0;
void request_stop(int) { stop_requested = 1; }

// No SA_RESTART: the signal interrupts ppoll, and the loop sees the request at once.
void stop_on(int signal_number) {
  struct sigaction action {};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  ::sigaction(signal_number, &action, nullptr);
}

// A packet larger than any MTU the test sets (TUN's default is 1500).
constexpr size_t kMaxPacketBytes = 65536;
// Packets a direction holds at most: 20 ms at ~100 MB/s of 1500-byte packets, with room.
constexpr size_t kQueuePackets = 4096;

// One direction: packets read from `from`, held by `line`, written to `to`.
struct Direction {
  const TunDevice& from;
  const TunDevice& to;
  DelayLine line;
  int64_t unwritten = 0;  // due packets the receiving interface refused (down, full)
};

// Every packet the `from` kernel has routed into its interface, offered to the line.
void read_waiting(Direction& d) {
  link_relay::Packet buffer(kMaxPacketBytes);
  for (;;) {
    const ssize_t n = ::read(d.from.fd(), buffer.data(), buffer.size());
    if (n <= 0) return;  // EAGAIN: none left; an interface going down ends reads too
    d.line.offer(link_relay::Packet(buffer.begin(), buffer.begin() + n), Clock::now());
  }
}

void write_due(Direction& d) {
  while (auto packet = d.line.take_due(Clock::now()))
    if (::write(d.to.fd(), packet->data(), packet->size()) < 0) ++d.unwritten;
}

// How long ppoll may sleep: until the earliest held packet is due, or indefinitely.
timespec* wait_until_due(const std::array<Direction*, 2>& directions, timespec& storage) {
  std::optional<Clock::time_point> earliest;
  for (const Direction* d : directions)
    if (auto due = d->line.next_due(); due && (!earliest || *due < *earliest)) earliest = due;
  if (!earliest) return nullptr;
  const auto left = std::max(Clock::duration::zero(), *earliest - Clock::now());
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
  storage.tv_sec = static_cast<time_t>(ns / 1000000000);
  storage.tv_nsec = static_cast<long>(ns % 1000000000);
  return &storage;
}

void print_counts(const char* label, const Direction& d) {
  std::printf("link relay: %s: %lld packets, %lld lost, %lld overflowed, %lld unwritten\n", label,
              static_cast<long long>(d.line.offered()), static_cast<long long>(d.line.lost()),
              static_cast<long long>(d.line.overflowed()), static_cast<long long>(d.unwritten));
}

int relay(const std::string& ns_a, const std::string& tun_a, const std::string& ns_b,
          const std::string& tun_b, double delay_ms, double loss_percent, uint64_t seed) {
  const TunDevice a(ns_a, tun_a);
  const TunDevice b(ns_b, tun_b);
  const auto delay = std::chrono::microseconds(static_cast<int64_t>(delay_ms * 1000));
  const double loss = loss_percent / 100;
  Direction a_to_b{a, b, DelayLine(delay, loss, seed, kQueuePackets)};
  Direction b_to_a{b, a, DelayLine(delay, loss, seed + 1, kQueuePackets)};
  const std::array<Direction*, 2> directions{&a_to_b, &b_to_a};
  stop_on(SIGTERM);
  stop_on(SIGINT);
  std::printf("link relay: ready: %s <-> %s, %.1f ms delay, %.2f%% loss each way\n", tun_a.c_str(),
              tun_b.c_str(), delay_ms, loss_percent);
  std::fflush(stdout);

  while (!stop_requested) {
    pollfd watched[2] = {{a.fd(), POLLIN, 0}, {b.fd(), POLLIN, 0}};
    timespec timeout;
    const int ready = ::ppoll(watched, 2, wait_until_due(directions, timeout), nullptr);
    if (ready < 0 && errno != EINTR) {
      std::fprintf(stderr, "link relay: poll failed: %s\n", std::strerror(errno));
      return 1;
    }
    if (ready > 0) {
      if (watched[0].revents & POLLIN) read_waiting(a_to_b);
      if (watched[1].revents & POLLIN) read_waiting(b_to_a);
    }
    for (Direction* d : directions) write_due(*d);
  }
  print_counts((tun_a + " -> " + tun_b).c_str(), a_to_b);
  print_counts((tun_b + " -> " + tun_a).c_str(), b_to_a);
  return 0;
}

// A number argument, or exit 2 naming it.
double number_argument(const char* text, const char* what, double low, double high) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value >= low && value <= high)) {
    std::fprintf(stderr, "link relay: %s '%s' is not a number in [%g, %g]\n", what, text, low,
                 high);
    std::exit(2);
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::fprintf(stderr,
                 "usage: link_relay NETNS_A TUN_A NETNS_B TUN_B DELAY_MS LOSS_PERCENT [SEED]\n"
                 "  e.g. link_relay /proc/$$/ns/net tun0 /proc/1234/ns/net tun1 20 1\n");
    return 2;
  }
  const double delay_ms = number_argument(argv[5], "DELAY_MS", 0, 10000);
  const double loss_percent = number_argument(argv[6], "LOSS_PERCENT", 0, 100);
  const auto seed =
      static_cast<uint64_t>(argc == 8 ? number_argument(argv[7], "SEED", 0, 1e15) : 1);
  try {
    return relay(argv[1], argv[2], argv[3], argv[4], delay_ms, loss_percent, seed);
  } catch (const link_relay::TunUnavailable& e) {
    std::fprintf(stderr, "link relay: %s\n", e.what());
    return 77;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "link relay: %s\n", e.what());
    return 1;
  }
}
