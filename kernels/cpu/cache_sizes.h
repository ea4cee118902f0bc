// kernels/cpu/cache_sizes.h — this CPU's data caches, read once at run time: what the CPU
// kernels size their cache blocks by (the convolutions' column bands and chunks, Winograd's
// bands), so that a CPU with a smaller or larger L2 than the Zen 4 core they were tuned on
// (1 MB) gets blocks that fit it.
//
// Read from Linux's /sys/devices/system/cpu/cpu0/cache (what the kernel reports for this CPU;
// glibc's sysconf reports the L3 of the whole package on some hosts, 320 MB on a 32 MB VM),
// then sysconf, then the Zen 4 sizes when neither knows.
//
// The GEMM's own blocking (kernels/cpu/gemm/gemm.cpp) stays constant: its depth blocks fix the
// order of every sum, and a depth read from the cache would make the bits depend on the host.
#pragma once

#include <cstdint>
#include <string>

namespace bareyolo::cpu {

struct CacheSizes {
  int64_t l1d = 0;  // bytes, per core
  int64_t l2 = 0;   // bytes, per core
  int64_t l3 = 0;   // bytes, shared
};

// This CPU's, read on the first call.
const CacheSizes& cache_sizes();

// Bytes of a band of operands a kernel writes and then consumes while they sit in L2 (the
// convolutions' column bands, Winograd's transformed bands): half of a core's L2, the other
// half left to the GEMM's packed panels. 512 KB on the Zen 4 core it was measured on.
inline int64_t l2_band_bytes() { return cache_sizes().l2 / 2; }

// A size as /sys writes it ("32K", "1024K", "32M", "512"), in bytes; 0 when it is not one.
int64_t parse_cache_size(const std::string& text);

}  // namespace bareyolo::cpu
