// bench/python_peer.cpp — see python_peer.h.
#include "bench/python_peer.h"

#include <cstdlib>

namespace bareyolo::bench {

std::string find_python_running(const std::string& python_check) {
  for (const char* python : {"/usr/bin/python3", "python3"}) {
    const std::string probe = std::string(python) + " -I -c '" + python_check + "' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return python;
  }
  return "";
}

}  // namespace bareyolo::bench
