// models/yolo/weights.h — a model's state_dict to and from a safetensors file, under YOLOv5's
// names and shapes (so weights move to and from PyTorch YOLOv5 with a few lines).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/safetensors.h"
#include "models/yolo/yolo_model.h"

namespace bareyolo::models {

// A weights file: safetensors, or a PyTorch YOLOv5 checkpoint (.pt, told by its zip signature
// rather than its name) read as models/yolo/torch_checkpoint.h says, without running its code.
SafetensorsFile load_weights_file(const std::string& path);
// Whether the weights file at `path` names its model (a .pt always does; a safetensors file
// with metadata "yaml" or "cfg"), reading no more than its header.
bool weights_carry_model(const std::string& path);

// The model yaml to build for `weights`: the `cfg` file when given, else the yaml the weights
// carry (a YOLOv5 checkpoint's "yaml", a bareyolo file's "cfg"). Throws std::invalid_argument
// naming `source` when there is neither.
ModelConfig weights_model_config(const SafetensorsFile& weights, const std::string& source,
                                 const std::string& cfg);

// Fine-tuning, as YOLOv5's intersect_dicts: copies every entry of `state` that `file` holds under
// the same name and shape, except names containing `exclude` (when not empty); the others keep
// their values (a fresh model's initialisation: the class rows of another nc). Returns how many
// were copied; throws naming `source` when none was (the weights of another model).
size_t transfer_state(const SafetensorsFile& file, const std::vector<StateEntry>& state,
                      const std::string& source, const std::string& exclude = "");

// Adds every state entry under `prefix` + its name: floating entries as F32, counters as I64.
void add_state(SafetensorsFile& file, const std::vector<StateEntry>& state,
               const std::string& prefix = "");

// Copies the entries named `prefix` + name from `file` into `state`. Every entry must be
// present with its shape and finite values before anything is copied, so a file that does not
// fit leaves the model untouched; the error names the file, the entry and what is wrong. A
// floating entry takes an F32, BF16 or F16 record (bf16 and fp16 weights widen exactly).
void load_state(const SafetensorsFile& file, const std::vector<StateEntry>& state,
                const std::string& source, const std::string& prefix = "");

// The number of classes a weights file's metadata states ("nc"), or 0 when it states none;
// throws std::invalid_argument naming `source` and the text when it is not a whole number in
// 1..kMaxClasses.
int metadata_nc(const SafetensorsFile& file, const std::string& source);

// The class names a weights file's metadata lists ("names", one per line), or none.
std::vector<std::string> metadata_names(const SafetensorsFile& file);

// Throws std::invalid_argument naming `source`, the tensor and its non-finite values when a
// floating record of `file` holds NaN or infinity: such a weights file is damaged (a model
// loaded from it predicts nothing and trains to NaN).
void require_finite_weights(const TensorRecord& record, const std::string& source);

// `file` with every F32, BF16 and F16 record in `dtype` (f32, bf16 or f16; to bf16 and f16
// rounds to nearest, to f32 is exact; a tensor f16 cannot hold, beyond 65504, stays f32), every
// other record (I64 counters, F64 anchors) and the metadata as they are: `bareyolo convert`,
// and the stripped best.safetensors. Resumable checkpoints keep f32 masters.
SafetensorsFile with_float_dtype(const SafetensorsFile& file, DType dtype);

}  // namespace bareyolo::models
