// kernels/cpu/host_memory.cpp — see host_memory.h.
#include "kernels/cpu/host_memory.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "kernels/round_up.h"

namespace bareyolo {

namespace {

std::string gibibytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", bytes / double(1ull << 30));
  return text;
}

// MemAvailable of /proc/meminfo in bytes, or -1 where it cannot be read.
double available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);)
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream fields(line.substr(13));
      double kib = -1;
      fields >> kib;
      return kib * 1024;
    }
  return -1;
}

}  // namespace

void* aligned_host_alloc(size_t alignment, size_t bytes, const char* purpose) {
  const size_t rounded = bytes == 0 ? alignment : round_up(bytes, alignment);
  if (void* data = std::aligned_alloc(alignment, rounded)) return data;
  throw_host_out_of_memory(rounded, purpose);
}

void throw_host_out_of_memory(size_t bytes, const char* purpose) {
  const double available = available_bytes();
  throw HostOutOfMemory("out of host memory: cannot allocate " + gibibytes(double(bytes)) +
                        " for " + purpose +
                        (available >= 0 ? " (" + gibibytes(available) + " available)" : "") +
                        "; try a smaller --batch or --imgsz, or fewer --workers");
}

}  // namespace bareyolo
