// tests/support/link_relay/delay_line.h — one direction of an emulated link: every packet is
// lost with a fixed probability or delivered a fixed delay after it was sent, in order (what
// `tc qdisc ... netem delay D loss P` does, on a kernel without netem).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <vector>

namespace link_relay {

using Clock = std::chrono::steady_clock;
using Packet = std::vector<uint8_t>;

class DelayLine {
 public:
  // loss: the probability in [0, 1] that a packet is dropped; a drawn sequence repeats for a
  // seed. capacity: the packets held at most (a router's queue); more are dropped as well.
  DelayLine(std::chrono::microseconds delay, double loss, uint64_t seed, size_t capacity);

  // A packet sent at `sent`: held until sent + delay, or dropped.
  void offer(Packet packet, Clock::time_point sent);
  // When the oldest held packet is due; nullopt when none is held.
  std::optional<Clock::time_point> next_due() const;
  // The oldest held packet if it is due at `now`, removed from the line.
  std::optional<Packet> take_due(Clock::time_point now);

  int64_t offered() const { return offered_; }
  int64_t lost() const { return lost_; }              // by the loss probability
  int64_t overflowed() const { return overflowed_; }  // by a full queue

 private:
  struct Held {
    Clock::time_point due;
    Packet packet;
  };
  std::chrono::microseconds delay_;
  std::bernoulli_distribution lose_;
  std::mt19937_64 random_;
  size_t capacity_;
  std::deque<Held> held_;  // in sending order, which is also due order (one fixed delay)
  int64_t offered_ = 0, lost_ = 0, overflowed_ = 0;
};

}  // namespace link_relay
