// engine/distributed/comm/gather.cpp — see gather.h.
#include "engine/distributed/comm/gather.h"

#include <algorithm>
#include <cstring>

namespace bareyolo::dist {

std::vector<std::vector<int64_t>> allgather_varying(Communicator& comm,
                                                    const std::vector<int64_t>& mine,
                                                    std::string_view tag) {
  const int world = comm.world_size();
  int64_t count = int64_t(mine.size());
  std::vector<int64_t> counts(static_cast<size_t>(world));
  comm.allgather(CommBuffer::of(&count, 1), CommBuffer::of(counts.data(), world),
                 std::string(tag) + " counts")
      ->wait();
  const int64_t longest = *std::max_element(counts.begin(), counts.end());
  std::vector<int64_t> send(mine), received(size_t(longest) * size_t(world));
  send.resize(size_t(longest), 0);
  comm.allgather(CommBuffer::of(send.data(), longest),
                 CommBuffer::of(received.data(), longest * world), tag)
      ->wait();
  std::vector<std::vector<int64_t>> all(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    const auto begin = received.begin() + int64_t(r) * longest;
    all[size_t(r)].assign(begin, begin + counts[size_t(r)]);
  }
  return all;
}

std::vector<std::string> allgather_strings(Communicator& comm, const std::string& mine,
                                           std::string_view tag) {
  // The byte count first, then the bytes in whole words.
  std::vector<int64_t> words(1 + (mine.size() + 7) / 8, 0);
  words[0] = int64_t(mine.size());
  std::memcpy(words.data() + 1, mine.data(), mine.size());
  std::vector<std::string> all;
  for (const std::vector<int64_t>& theirs : allgather_varying(comm, words, tag))
    all.emplace_back(reinterpret_cast<const char*>(theirs.data() + 1), size_t(theirs[0]));
  return all;
}

}  // namespace bareyolo::dist
