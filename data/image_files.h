// data/image_files.h — which image files a split consists of, and where their labels are.
//
// A source is a folder (searched recursively), a .txt file listing one image per line
// (relative lines are relative to the .txt's folder), or a list of those. Files are kept
// when their lower-cased extension is one YOLOv5 accepts; the result is sorted. Formats
// stb_image cannot decode (tif, webp, dng, mpo, pfm) are still listed, so verification
// reports them instead of silently ignoring them.
//
// Label rule (YOLOv5's): replace the last "/images/" in the path with "/labels/" and the
// extension with ".txt":  root/images/train/x.jpg -> root/labels/train/x.txt.
#pragma once

#include <string>
#include <vector>

#include "data/label_file.h"  // defines: Problem

namespace bareyolo::data {

// Throws std::runtime_error naming a source that does not exist. Symbolic links are followed;
// what the folder walk met but could not use (a folder that cannot be listed, a folder
// reached twice through a link) goes to `listing_problems` as warnings, when given. An image
// entry that leads nowhere is listed, for verification to report.
std::vector<std::string> list_image_files(const std::vector<std::string>& sources,
                                          std::vector<Problem>* listing_problems = nullptr);

std::string label_path_for(const std::string& image_path);

bool has_image_extension(const std::string& path);

}  // namespace bareyolo::data
