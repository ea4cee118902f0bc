// engine/user_cache.h — the folder where bareyolo keeps what it may rebuild at any time, per
// user: the data caches of read-only datasets (data/cache_files.h) and the cuDNN algorithm
// choices (engine/algorithm_cache.h).
#pragma once

#include <filesystem>

namespace bareyolo {

// $BAREYOLO_CACHE_DIR, else $XDG_CACHE_HOME/bareyolo, else ~/.cache/bareyolo, else (no HOME) a
// bareyolo-cache folder in the system's temporary folder. Not created here.
std::filesystem::path user_cache_folder();

}  // namespace bareyolo
