// models/train/image_caches.h — `--cache ram|disk` in a training run: the train and val splits'
// decoded-image caches (data/image_cache.h), built once per host and shared by every rank.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>

#include "data/dataset.h"
#include "engine/distributed/comm/communicator.h"

namespace bareyolo::models {

// Makes each split's dataset read its images from the cache `request` asks for (its
// label_cache_file is each split's own). Rank 0 opens (and when needed builds) first, the
// other ranks after it, so the build is rank 0's and its notes reach `log`; `comm` null: one
// process.
void use_image_caches(const data::ImageCacheRequest& request,
                      std::initializer_list<data::OpenedSplit*> splits, int rank,
                      dist::Communicator* comm, const std::function<void(const std::string&)>& log);

}  // namespace bareyolo::models
