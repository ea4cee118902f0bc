// tests/support/link_relay/delay_line.cpp — see delay_line.h.
#include "tests/support/link_relay/delay_line.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace link_relay {

DelayLine::DelayLine(std::chrono::microseconds delay, double loss, uint64_t seed, size_t capacity)
    : delay_(delay), lose_(loss), random_(seed), capacity_(capacity) {
  if (delay.count() < 0) throw std::invalid_argument("a link's delay cannot be negative");
  if (!(loss >= 0 && loss <= 1))
    throw std::invalid_argument("a link's loss " + std::to_string(loss) +
                                " is not a probability in [0, 1]");
}

void DelayLine::offer(Packet packet, Clock::time_point sent) {
  ++offered_;
  if (lose_(random_)) {
    ++lost_;
    return;
  }
  if (held_.size() >= capacity_) {
    ++overflowed_;
    return;
  }
  held_.push_back({sent + delay_, std::move(packet)});
}

std::optional<Clock::time_point> DelayLine::next_due() const {
  if (held_.empty()) return std::nullopt;
  return held_.front().due;
}

std::optional<Packet> DelayLine::take_due(Clock::time_point now) {
  if (held_.empty() || held_.front().due > now) return std::nullopt;
  Packet packet = std::move(held_.front().packet);
  held_.pop_front();
  return packet;
}

}  // namespace link_relay
