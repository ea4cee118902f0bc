// data/label_cache_json.h — a label cache's text (label_cache.h says where caches live and when
// they are valid): a split's verification report as JSON, written and read back.
#pragma once

#include <optional>
#include <string>

#include "data/verify.h"

namespace bareyolo::data {

// The format's version, in the file and in the fingerprint. 2: missing_label_files; label
// contents fingerprinted. 3: polygon labels (an image's segments; before, such an image was
// skipped as corrupt).
inline constexpr int kLabelCacheVersion = 3;

// The cache's text for `report` of the split with `fingerprint`.
std::string label_cache_json(const SplitReport& report, const std::string& fingerprint);

// The report a label cache's text holds, when it is a cache of this format version with
// `fingerprint` and every value in it is one verify_images could have written (classes in
// [0, num_classes), boxes normalised with a width and height > 0, polygons of at least 3
// normalised points, one per box, images of a positive size, counts >= 0); nullopt otherwise, and
// the caller verifies the split again. A cache is a file anyone can edit or damage: nothing in it
// is trusted before this check.
std::optional<SplitReport> parse_label_cache(const std::string& text,
                                             const std::string& fingerprint, int num_classes);

}  // namespace bareyolo::data
