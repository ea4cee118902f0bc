// tests/unit/cache_sizes.cpp — the CPU's cache sizes the kernels size their blocks by: /sys's
// size strings parsed, and what this machine reports ordered and plausible.
#include <doctest/doctest.h>

#include "kernels/cpu/cache_sizes.h"

namespace bareyolo {

TEST_CASE("cache sizes parse /sys's forms and refuse anything else") {
  CHECK(cpu::parse_cache_size("32K") == 32 * 1024);
  CHECK(cpu::parse_cache_size("1024K") == 1024 * 1024);
  CHECK(cpu::parse_cache_size("32M") == 32 * 1024 * 1024);
  CHECK(cpu::parse_cache_size("2G") == int64_t{2} << 30);
  CHECK(cpu::parse_cache_size("512") == 512);
  for (const char* bad : {"", "K", "12Q", "1.5M", "-4K", "32KB"}) {
    CAPTURE(bad);
    CHECK(cpu::parse_cache_size(bad) == 0);
  }
}

TEST_CASE("this CPU's cache sizes are read, ordered and plausible") {
  const cpu::CacheSizes& sizes = cpu::cache_sizes();
  CHECK(sizes.l1d >= 4 * 1024);
  CHECK(sizes.l1d <= sizes.l2);
  CHECK(sizes.l2 <= 64 * 1024 * 1024);
  CHECK(sizes.l3 > 0);
  CHECK(&cpu::cache_sizes() == &sizes);  // read once
}

}  // namespace bareyolo
