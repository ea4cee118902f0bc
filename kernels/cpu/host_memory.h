// kernels/cpu/host_memory.h — aligned host allocations that fail with a sentence. A bare
// std::bad_alloc reaches the user as "std::bad_alloc"; HostOutOfMemory still is one (code that
// catches bad_alloc keeps working) but says how much was asked for, for what, how much the
// machine has available, and what to lower.
#pragma once

#include <cstddef>
#include <new>
#include <string>

namespace bareyolo {

class HostOutOfMemory : public std::bad_alloc {
 public:
  explicit HostOutOfMemory(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

// `bytes` (rounded up to a multiple of `alignment`, at least one) aligned to `alignment`, to be
// released with std::free. Throws HostOutOfMemory naming `purpose` (e.g. "a tensor").
void* aligned_host_alloc(size_t alignment, size_t bytes, const char* purpose);

// Throws the HostOutOfMemory of a failed request for `bytes` for `purpose`.
[[noreturn]] void throw_host_out_of_memory(size_t bytes, const char* purpose);

}  // namespace bareyolo
