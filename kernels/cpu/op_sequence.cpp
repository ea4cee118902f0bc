// kernels/cpu/op_sequence.cpp — see kernels/op_sequence.h.
#include "kernels/op_sequence.h"

#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace bareyolo::op_sequence {

namespace detail {

std::atomic<bool> g_recording{false};

namespace {
std::mutex g_mutex;  // guards g_calls
std::vector<Call> g_calls;
}  // namespace

void append(Call call) {
  const std::lock_guard lock(g_mutex);
  g_calls.push_back(std::move(call));
}

std::string address(const void* pointer) {
  char text[2 + 2 * sizeof(void*) + 1];
  std::snprintf(text, sizeof text, "%p", pointer);
  return text;
}

}  // namespace detail

std::string hex(const void* data, size_t bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < bytes; ++i) {
    const unsigned byte = static_cast<const unsigned char*>(data)[i];
    text += kDigits[byte >> 4];
    text += kDigits[byte & 15];
  }
  return text;
}

std::string Call::str() const {
  std::string text = op + "(";
  for (size_t i = 0; i < arguments.size(); ++i) text += (i ? ", " : "") + arguments[i];
  return text + ")";
}

Recording::Recording() {
  if (detail::g_recording.exchange(true))
    throw std::logic_error("op_sequence::Recording: another recording is already running");
  take();
}

Recording::~Recording() { detail::g_recording.store(false); }

std::vector<Call> Recording::take() {
  const std::lock_guard lock(detail::g_mutex);
  return std::exchange(detail::g_calls, {});
}

}  // namespace bareyolo::op_sequence
