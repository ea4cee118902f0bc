// engine/distributed/process_name.h — how bareyolo names a process in a message that another
// process, perhaps on another machine, reads: "pid 123 on host node-2" (a store client that
// was refused, the job holding a run directory's lock).
#pragma once

#include <unistd.h>

#include <string>

namespace bareyolo::dist {

inline std::string this_process_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return "pid " + std::to_string(::getpid()) + " on host " + host;
}

}  // namespace bareyolo::dist
