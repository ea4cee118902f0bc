// models/yolo/torch_checkpoint.h — a PyTorch YOLOv5 checkpoint (.pt) as a weights file, read
// without Python and without running any of its code (engine/torch_pickle.h).
//
// YOLOv5's train.py saves a dict: epoch, best_fitness, model and ema (the whole DetectionModel
// objects, fp16), updates, optimizer, opt, git, date; its strip_optimizer sets ema and the
// optimizer to None when training ends. As YOLOv5 loads one, the weights are the 'ema' model
// when present and not None, else 'model'. Its state_dict is walked as PyTorch's does (each
// module's _parameters, then its persistent _buffers, then its _modules, names joined by '.'),
// so the records carry YOLOv5's names, with each value's bytes as stored (F16 stays F16).
// The model object gives the rest: its yaml dict (metadata "yaml", as yaml text), nc, names
// and stride (metadata "nc", "names" one per line, "stride" comma-separated).
#pragma once

#include <string>

#include "engine/safetensors.h"
#include "engine/torch_zip.h"

namespace bareyolo::models {

// Whether the file at `path` is a zip (its first bytes), as a .pt is and a safetensors never.
bool is_torch_checkpoint(const std::string& path);

SafetensorsFile torch_checkpoint_weights(const TorchZip& zip);
SafetensorsFile read_torch_checkpoint(const std::string& path);

}  // namespace bareyolo::models
