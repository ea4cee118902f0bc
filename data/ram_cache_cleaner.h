// data/ram_cache_cleaner.h — removing a `ram` image cache (/dev/shm) when its job ends, however
// it ends: SIGKILL and the OOM killer included, under bareyolo's launcher or torchrun alike.
//
// The process that brings a ram cache into use starts a cleaner: a small detached process
// (its own session, so a kill of the job's process group spares it, holding no descriptor of
// the job's) that holds an exclusive flock on `<file>.cleaner` for its life. Every process
// using the cache holds a shared flock on the cache file itself (image_cache.h); the kernel
// drops it when that process dies. Every 200 ms the cleaner tries an exclusive flock on the
// cache: when it gets one, no process uses the cache any more, and under the build lock
// (`<file>.lock`) it removes the cache, its lock file and its own file, and exits.
//
// A ram cache found with no live cleaner (its flock free: the machine's processes were all
// killed, cleaner included) was left by a job that is gone: it is stale, and replaced.
#pragma once

#include <string>

namespace bareyolo::data {

// Whether a cleaner holds `<file>.cleaner`. Call under the build lock.
bool ram_cache_cleaner_alive(const std::string& file);

// Starts the cleaner of `file` and waits (5 s at most) until it holds its flock. Call under
// the build lock, after taking this process's shared flock on the cache. Throws
// std::runtime_error when it cannot start.
void start_ram_cache_cleaner(const std::string& file);

}  // namespace bareyolo::data
