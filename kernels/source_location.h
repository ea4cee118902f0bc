// kernels/source_location.h — where a call came from: std::source_location, or, where the
// standard library lacks it, the same members built from the compiler's builtins.
//
// The step guard and the allocators name the caller's file:line in their reports through a
// defaulted `SourceLocation where = SourceLocation::current()` argument. The fuzz build pairs
// clang 14 with libstdc++ 12, whose <source_location> needs a builtin clang 14 does not have;
// clang and GCC both evaluate __builtin_FILE/__builtin_LINE in a default argument at the
// outermost call site, which is all the fallback needs.
#pragma once

#include <cstdint>
#include <source_location>

namespace bareyolo {

#if defined(__cpp_lib_source_location)
using SourceLocation = std::source_location;
#else
class SourceLocation {
 public:
  static constexpr SourceLocation current(const char* file = __builtin_FILE(),
                                          std::uint_least32_t line = __builtin_LINE()) noexcept {
    SourceLocation here;
    here.file_ = file;
    here.line_ = line;
    return here;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr std::uint_least32_t line() const noexcept { return line_; }

 private:
  const char* file_ = "";
  std::uint_least32_t line_ = 0;
};
#endif

}  // namespace bareyolo
