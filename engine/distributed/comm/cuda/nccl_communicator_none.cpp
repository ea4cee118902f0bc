// engine/distributed/comm/cuda/nccl_communicator_none.cpp — the NCCL backend's stand-in in builds
// without CUDA: it reports that NCCL is absent and refuses to make a communicator, with what to do
// instead.
#include <stdexcept>

#include "engine/distributed/comm/nccl_communicator.h"

namespace bareyolo::dist {

bool nccl_compiled() { return false; }

std::optional<cuda::LibraryVersion> nccl_version() { return std::nullopt; }

std::unique_ptr<Communicator> make_nccl_communicator(Store&, int, int, int,
                                                     std::chrono::milliseconds) {
  throw std::runtime_error("this build has no CUDA/NCCL; use --backend tcp");
}

}  // namespace bareyolo::dist
