// models/train/image_caches.cpp — see image_caches.h.
#include "models/train/image_caches.h"

namespace bareyolo::models {

namespace {

void open_caches(data::ImageCacheRequest request, std::initializer_list<data::OpenedSplit*> splits,
                 const std::function<void(const std::string&)>& log) {
  for (data::OpenedSplit* split : splits) {
    request.label_cache_file = split->verification.cache_file;
    std::vector<std::string> notes;
    split->dataset.use_cache(data::open_image_cache(split->dataset.records(), request, notes));
    for (const std::string& note : notes) log(note);
  }
}

}  // namespace

void use_image_caches(const data::ImageCacheRequest& request,
                      std::initializer_list<data::OpenedSplit*> splits, int rank,
                      dist::Communicator* comm,
                      const std::function<void(const std::string&)>& log) {
  if (request.mode == data::CacheMode::none) return;
  if (rank == 0) open_caches(request, splits, log);
  if (comm) comm->barrier("image caches")->wait();
  if (rank != 0) open_caches(request, splits, [](const std::string&) {});  // rank 0 speaks
}

}  // namespace bareyolo::models
