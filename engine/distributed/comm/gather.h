// engine/distributed/comm/gather.h — all-gathers of values whose count differs between ranks
// (the contract's allgather takes one count for all): the counts first, then every rank's
// values padded to the longest. Sharded validation gathers its statistics this way, and the
// trace its events.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/distributed/comm/communicator.h"

namespace bareyolo::dist {

// Every rank passes its values; every rank gets every rank's, indexed by rank. `tag` names the
// gather in its collectives' fingerprints ("validation gather"; the counts' adds " counts").
std::vector<std::vector<int64_t>> allgather_varying(Communicator& comm,
                                                    const std::vector<int64_t>& mine,
                                                    std::string_view tag);

// The same for one string per rank (its bytes travel in int64 words).
std::vector<std::string> allgather_strings(Communicator& comm, const std::string& mine,
                                           std::string_view tag);

}  // namespace bareyolo::dist
