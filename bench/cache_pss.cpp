// bench/cache_pss.cpp — see cache_pss.h.
#include "bench/cache_pss.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace bareyolo::bench {

namespace {

// A forked rank: opens the cache and reads every image, says so on `report`, waits for a byte
// on `go` (all ranks have read theirs), then reports its PSS of the cache and exits.
[[noreturn]] void run_rank(const std::vector<data::ImageRecord>& records,
                           const data::ImageCacheRequest& request, int report, int go) {
  long pss = -1;
  try {
    std::vector<std::string> notes;
    auto cache = data::open_image_cache(records, request, notes);
    for (int64_t i = 0; i < cache->size(); ++i) cache->load(i);
    char byte = 'r';
    if (::write(report, &byte, 1) == 1 && ::read(go, &byte, 1) == 1)
      pss = mapped_pss_kb(cache->file());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cache PSS rank: %s\n", e.what());
  }
  (void)!::write(report, &pss, sizeof pss);
  ::_exit(pss >= 0 ? 0 : 1);
}

// The summed PSS of `ranks` processes holding the cache at the same time.
long summed_pss_kb(int ranks, const std::vector<data::ImageRecord>& records,
                   const data::ImageCacheRequest& request) {
  int report[2], go[2];
  if (::pipe(report) != 0 || ::pipe(go) != 0) throw std::runtime_error("pipe failed");
  std::vector<pid_t> children;
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) run_rank(records, request, report[1], go[0]);
    children.push_back(pid);
  }
  char byte;
  for (int r = 0; r < ranks; ++r)
    if (::read(report[0], &byte, 1) != 1) throw std::runtime_error("a PSS rank failed");
  for (int r = 0; r < ranks; ++r) (void)!::write(go[1], "g", 1);
  long total = 0;
  for (int r = 0; r < ranks; ++r) {
    long pss = -1;
    if (::read(report[0], &pss, sizeof pss) != sizeof pss || pss < 0)
      throw std::runtime_error("a PSS rank failed");
    total += pss;
  }
  for (pid_t pid : children) ::waitpid(pid, nullptr, 0);
  for (int fd : {report[0], report[1], go[0], go[1]}) ::close(fd);
  return total;
}

}  // namespace

long mapped_pss_kb(const std::string& file) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_file = false;
  long total = 0;
  while (std::getline(smaps, line)) {
    std::istringstream fields(line);
    std::string first;
    fields >> first;
    if (first.find('-') != std::string::npos && first.back() != ':') {  // a mapping's header
      in_file = line.size() >= file.size() &&
                line.find(file) != std::string::npos;  // "(deleted)" may follow the path
    } else if (in_file && first == "Pss:") {
      long kb = 0;
      fields >> kb;
      total += kb;
    }
  }
  return total;
}

CachePss measure_cache_pss(const std::vector<data::ImageRecord>& records,
                           const data::ImageCacheRequest& request) {
  return {summed_pss_kb(1, records, request), summed_pss_kb(2, records, request)};
}

}  // namespace bareyolo::bench
