// bench/cache_pss.h — how much memory the decoded-image cache costs a host with several ranks:
// the proportional set size (PSS: each resident page divided by the number of processes
// mapping it) of the cache's mapping, summed over 2 rank processes that each open the cache
// and read every image, against one such process alone. One copy shared: ratio ~1; a copy
// per rank (YOLOv5's --cache ram): ~2.
#pragma once

#include <string>

#include "data/image_cache.h"

namespace bareyolo::bench {

// kB of PSS of this process's mappings of `file` (/proc/self/smaps).
long mapped_pss_kb(const std::string& file);

struct CachePss {
  long alone_kb = 0;      // one process
  long two_ranks_kb = 0;  // the sum over 2 processes at once
  double ratio() const { return double(two_ranks_kb) / double(alone_kb); }
};

// Forks the processes (call it with no other thread running); each opens the cache
// `request` names for `records`, as a rank does, and reads every image.
CachePss measure_cache_pss(const std::vector<data::ImageRecord>& records,
                           const data::ImageCacheRequest& request);

}  // namespace bareyolo::bench
