// engine/user_cache.cpp — see user_cache.h.
#include "engine/user_cache.h"

#include <cstdlib>

namespace bareyolo {

std::filesystem::path user_cache_folder() {
  namespace fs = std::filesystem;
  if (const char* dir = std::getenv("BAREYOLO_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return fs::path(xdg) / "bareyolo";
  if (const char* home = std::getenv("HOME"); home && *home)
    return fs::path(home) / ".cache" / "bareyolo";
  return fs::temp_directory_path() / "bareyolo-cache";
}

}  // namespace bareyolo
