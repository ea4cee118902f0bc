// engine/algorithm_cache.h — the per-user file that remembers which cuDNN algorithm each
// convolution shape runs (kernels/convolution_choices.h), so that a run times each shape once
// per machine, not once per process, and every later run on that GPU and cuDNN makes the same
// choices (the same bits).
//
// One file per identity (GPU model, compute capability, cuDNN version), named after it, in the
// user cache folder (engine/user_cache.h: $BAREYOLO_CACHE_DIR, else $XDG_CACHE_HOME/bareyolo,
// else ~/.cache/bareyolo). The identity is
// also written inside, and a file of another identity is never read (a renamed or copied one
// included). It is JSON, one object per choice with its key's fields by name:
//
//   {"format": "bareyolo convolution algorithms", "version": 1,
//    "identity": "NVIDIA H200, sm_90, cuDNN 9.10.2",
//    "choices": [
//     {"pass":"forward","x":[64,3,640,640],"x_batch_stride":1228800,"y_batch_stride":3276800,
//      "weight":[32,6,6],"stride":[2,2],"pad":[2,2],"alignment":256,"operands":"bf16",
//      "layout":"nchw","deterministic":true,"algorithm":1,"math":1,"workspace":0,
//      "milliseconds":0.41},   (one line each)
//     ...]}
//
// It is a cache: a file that cannot be read or parsed is ignored with a sentence for the log
// (and replaced at the next save), and a save that fails says so and training goes on.
// Saving merges with what the file holds by then (another run may have added shapes) and
// replaces it atomically (engine/atomic_file.h).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "kernels/convolution_choices.h"

namespace bareyolo {

// The file's text for `choices` made on a GPU of `identity`.
std::string convolution_choices_json(const std::string& identity,
                                     const ops::ConvolutionChoices& choices);

struct CachedChoices {
  std::string identity;
  ops::ConvolutionChoices choices;
};
// Parses the file's text. Throws std::invalid_argument naming `source` and what is wrong (not
// JSON, another format or version, a choice whose field is missing or mistyped, with its index).
CachedChoices parse_convolution_choices(const std::string& text, const std::string& source);

// Where the choices of `identity` live: a file of the user cache folder named after it.
std::filesystem::path algorithm_cache_path(const std::string& identity);

// The choices of the file at `path` when it was made on a GPU of `identity`; none when there is
// no file, or, with `why_not` saying why, when it is of another identity or cannot be read or
// parsed.
std::optional<ops::ConvolutionChoices> read_algorithm_cache(const std::filesystem::path& path,
                                                            const std::string& identity,
                                                            std::string& why_not);
// Writes `choices` into the file at `path` (its folders made), atomically, with the choices
// the file holds for `identity` that `choices` lacks (or holds provisional, which are never
// written: a later run chooses again); returns how many it holds then. Throws
// std::runtime_error (or std::filesystem::filesystem_error) naming the path when it cannot.
size_t write_algorithm_cache(const std::filesystem::path& path, const std::string& identity,
                             const ops::ConvolutionChoices& choices);

// Adopts the cache file's choices for GPU `device` (nothing for the CPU). Returns a sentence
// for the log: how many choices came from which file, or why the file was ignored; "" when
// there is no file (or no GPU).
std::string load_algorithm_cache(const Device& device);

// Writes `device`'s choices into its cache file, merged with the file's, when some were made or
// adopted since the last load or save. Returns a sentence for the log: how many were written
// where, or why not (a warning; never throws); "" when there was nothing to write.
std::string save_algorithm_cache(const Device& device);

}  // namespace bareyolo
