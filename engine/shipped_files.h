// engine/shipped_files.h — where the files that come with bareyolo are at run time: the model
// yamls (models/*.yaml) and the benches' Python peers (bench/*.py).
//
// A binary runs where it was built (build/ inside the checkout, whose parent holds them), from a
// folder it was copied to with those files beside it (tools/stage_gpu_check.sh stages the
// binaries with models/), installed (PREFIX/bin, the files in PREFIX/share/bareyolo), or
// anywhere with BAREYOLO_HOME naming the folder that holds them. shipped_file() looks, in
// order, in $BAREYOLO_HOME, in the executable's folder, its parent and ../share/bareyolo; the
// first that has the file wins. Nothing is compiled in: an installed or packaged binary never
// reads the checkout it was built from.
#pragma once

#include <optional>
#include <string>

namespace bareyolo {

// The path of `relative` (e.g. "models/yolov5n.yaml") among the shipped files; throws naming
// every place looked at when none has it.
std::string shipped_file(const std::string& relative);

// The same, nullopt when none has it.
std::optional<std::string> find_shipped_file(const std::string& relative);

}  // namespace bareyolo
