// tools/bareyolo/max_pixels_option.h — --max-pixels, defined once for every command that reads
// images (train, val, data-check, predict): an image whose header claims more pixels is
// refused before it is decoded (data/image.h), so one small file cannot claim gigabytes.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>

#include "tools/bareyolo/validators.h"

namespace bareyolo::cli {

// Binds --max-pixels to `max_pixels`, whose initial value (data::kDefaultMaxPixels) is shown as
// the default.
inline void add_max_pixels_option(CLI::App* command, int64_t& max_pixels) {
  command
      ->add_option("--max-pixels", max_pixels,
                   "Largest image in pixels (width x height), read from its header before "
                   "decoding; larger ones are skipped as bad images (default: PIL's limit)")
      ->check(kPositive)
      ->capture_default_str();
}

}  // namespace bareyolo::cli
