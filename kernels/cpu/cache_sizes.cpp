// kernels/cpu/cache_sizes.cpp — see cache_sizes.h.
#include "kernels/cpu/cache_sizes.h"

#include <unistd.h>

#include <cctype>
#include <fstream>

namespace bareyolo::cpu {

namespace {

// The Zen 4 core the kernels were tuned on.
constexpr CacheSizes kDefaultSizes{32 << 10, 1 << 20, 32 << 20};

std::string read_word(const std::string& path) {
  std::ifstream file(path);
  std::string word;
  file >> word;
  return word;
}

// The data or unified caches of cpu0 by level, from /sys; 0 where it says nothing.
CacheSizes read_sys_cache_sizes() {
  CacheSizes sizes;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    const std::string level = read_word(dir + "/level"), type = read_word(dir + "/type");
    if (level.empty()) break;
    if (type == "Instruction") continue;
    const int64_t bytes = parse_cache_size(read_word(dir + "/size"));
    if (level == "1") sizes.l1d = bytes;
    if (level == "2") sizes.l2 = bytes;
    if (level == "3") sizes.l3 = bytes;
  }
  return sizes;
}

int64_t sysconf_bytes(int name) {
  const long value = sysconf(name);
  return value > 0 ? value : 0;
}

CacheSizes read_cache_sizes() {
  const CacheSizes sys = read_sys_cache_sizes();
  auto pick = [](int64_t from_sys, int64_t from_sysconf, int64_t fallback) {
    return from_sys > 0 ? from_sys : from_sysconf > 0 ? from_sysconf : fallback;
  };
  return {pick(sys.l1d, sysconf_bytes(_SC_LEVEL1_DCACHE_SIZE), kDefaultSizes.l1d),
          pick(sys.l2, sysconf_bytes(_SC_LEVEL2_CACHE_SIZE), kDefaultSizes.l2),
          pick(sys.l3, sysconf_bytes(_SC_LEVEL3_CACHE_SIZE), kDefaultSizes.l3)};
}

}  // namespace

const CacheSizes& cache_sizes() {
  static const CacheSizes sizes = read_cache_sizes();
  return sizes;
}

int64_t parse_cache_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 12) return 0;
  const int64_t number = std::stoll(text.substr(0, digits));
  const std::string unit = text.substr(digits);
  if (unit.empty()) return number;
  if (unit == "K") return number << 10;
  if (unit == "M") return number << 20;
  if (unit == "G") return number << 30;
  return 0;
}

}  // namespace bareyolo::cpu
