// models/yolo/weights.cpp — see weights.h.
#include "models/yolo/weights.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "models/yolo/torch_checkpoint.h"

namespace bareyolo::models {

namespace {
std::string dims_text(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}
}  // namespace

SafetensorsFile load_weights_file(const std::string& path) {
  return is_torch_checkpoint(path) ? read_torch_checkpoint(path) : SafetensorsFile::load(path);
}

bool weights_carry_model(const std::string& path) {
  if (is_torch_checkpoint(path)) return true;
  const auto& meta = SafetensorsFile::load_metadata(path).metadata();
  return meta.count("yaml") || meta.count("cfg");
}

ModelConfig weights_model_config(const SafetensorsFile& weights, const std::string& source,
                                 const std::string& cfg) {
  if (!cfg.empty()) return load_model_config(cfg);
  const auto& meta = weights.metadata();
  if (meta.count("yaml")) return parse_model_config(meta.at("yaml"), source + " (its model yaml)");
  if (meta.count("cfg")) return load_model_config(meta.at("cfg"));
  throw std::invalid_argument(source +
                              " does not say which model it holds (no 'yaml' or 'cfg' "
                              "metadata): give the model yaml with --cfg");
}

int metadata_nc(const SafetensorsFile& file, const std::string& source) {
  if (!file.metadata().count("nc")) return 0;
  const int64_t nc = file.metadata_integer("nc", source);
  if (nc < 1 || nc > kMaxClasses)
    throw std::invalid_argument(source + ": metadata 'nc' is " + std::to_string(nc) +
                                ", outside 1.." + std::to_string(kMaxClasses) +
                                " (the file is damaged, or not a model's weights)");
  return int(nc);
}

std::vector<std::string> metadata_names(const SafetensorsFile& file) {
  std::vector<std::string> names;
  const auto found = file.metadata().find("names");
  if (found == file.metadata().end() || found->second.empty()) return names;
  const std::string& joined = found->second;
  for (size_t begin = 0; begin <= joined.size();) {
    size_t end = joined.find('\n', begin);
    if (end == std::string::npos) end = joined.size();
    names.push_back(joined.substr(begin, end - begin));
    begin = end + 1;
  }
  return names;
}

void require_finite_weights(const TensorRecord& record, const std::string& source) {
  require_finite(record, source,
                 "the weights file is damaged (changed on disk or in transfer, or saved from a "
                 "diverged run): use an intact copy");
}

void add_state(SafetensorsFile& file, const std::vector<StateEntry>& state,
               const std::string& prefix) {
  for (const StateEntry& e : state) {
    const Tensor& value = *e.value;
    if (value.dtype() == DType::f64)  // double models (gradient checks) still save float32
      file.add_values<float>(
          prefix + e.name,
          [&] {
            std::vector<double> d = value.to_doubles();
            return std::vector<float>(d.begin(), d.end());
          }(),
          e.dims);
    else
      file.add_tensor(prefix + e.name, value, e.dims);
  }
}

namespace {
// The record `name` of `file` as a value for entry `e`: finite, and of its dtype (floats of any
// width widen exactly). Throws naming `source` otherwise.
Tensor entry_value(const SafetensorsFile& file, const std::string& name, const StateEntry& e,
                   const std::string& source) {
  const TensorRecord& record = file.record(name);
  require_finite_weights(record, source);
  const bool floating_file =
      record.dtype == "F32" || record.dtype == "BF16" || record.dtype == "F16";
  const bool floating_model = e.value->dtype() == DType::f32 || e.value->dtype() == DType::f64;
  // Every F16 and BF16 value is a float: widened exactly, whatever the file's width.
  if (floating_file && floating_model) return file.float_tensor(name);
  Tensor t = file.tensor(name);
  if (t.dtype() != e.value->dtype())
    throw std::invalid_argument(source + ": '" + name + "' holds " + record.dtype +
                                ", the model expects " + dtype_name(e.value->dtype()));
  return t;
}

void assign(const StateEntry& e, const Tensor& value) {
  Tensor& target = *e.value;
  if (value.dtype() == target.dtype()) {
    target.copy_from(value.reshape(target.shape()));
  } else {  // float values into a double model
    std::vector<double> values = value.to_doubles();
    target.copy_from(Tensor::from_vector(values, target.shape()));
  }
}
}  // namespace

void load_state(const SafetensorsFile& file, const std::vector<StateEntry>& state,
                const std::string& source, const std::string& prefix) {
  std::vector<Tensor> loaded;
  for (const StateEntry& e : state) {
    const std::string name = prefix + e.name;
    if (!file.contains(name))
      throw std::invalid_argument(source + ": missing '" + name +
                                  "' (is it a checkpoint of this model and nc?)");
    const TensorRecord& record = file.record(name);
    if (record.shape != e.dims)
      throw std::invalid_argument(source + ": '" + name + "' has shape " + dims_text(record.shape) +
                                  ", the model expects " + dims_text(e.dims) +
                                  " (a different model or nc?)");
    loaded.push_back(entry_value(file, name, e, source));
  }
  for (size_t i = 0; i < state.size(); ++i) assign(state[i], loaded[i]);
}

size_t transfer_state(const SafetensorsFile& file, const std::vector<StateEntry>& state,
                      const std::string& source, const std::string& exclude) {
  std::vector<std::pair<const StateEntry*, Tensor>> matched;
  for (const StateEntry& e : state) {
    if (!file.contains(e.name) || file.record(e.name).shape != e.dims) continue;
    if (!exclude.empty() && e.name.find(exclude) != std::string::npos) continue;
    matched.push_back({&e, entry_value(file, e.name, e, source)});
  }
  if (matched.empty())
    throw std::invalid_argument(source + ": not one of the model's " +
                                std::to_string(state.size()) +
                                " tensors is in it under its name and shape (weights of another "
                                "model? give the matching --cfg)");
  for (const auto& [entry, value] : matched) assign(*entry, value);
  return matched.size();
}

namespace {
// `values` as F16 bits, each the nearest half (ties to even) as YOLOv5's .half() rounds; false
// when a finite value overflows (a half holds at most 65504).
bool narrowed_to_f16(const std::vector<float>& values, std::vector<uint8_t>& bytes) {
  bytes.resize(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits = _cvtss_sh(values[i], _MM_FROUND_TO_NEAREST_INT);
    if ((bits & 0x7c00) == 0x7c00 && std::isfinite(values[i])) return false;
    std::memcpy(bytes.data() + 2 * i, &bits, 2);
  }
  return true;
}
}  // namespace

SafetensorsFile with_float_dtype(const SafetensorsFile& file, DType dtype) {
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16)
    throw std::invalid_argument(std::string("weights convert to F32, BF16 or F16, not ") +
                                dtype_name(dtype));
  SafetensorsFile converted;
  for (const TensorRecord& record : file.records()) {
    if (record.dtype != "F32" && record.dtype != "BF16" && record.dtype != "F16") {
      converted.add(record);  // counters, anchors (F64), indices: as they are
      continue;
    }
    // Widened to f32 first (exact), so that a narrowing rounds once.
    const Tensor wide = file.float_tensor(record.name);
    TensorRecord half{record.name, "F16", record.shape, {}};
    if (dtype == DType::f16 && narrowed_to_f16(wide.to_vector<float>(), half.bytes))
      converted.add(std::move(half));
    else  // f32, bf16, or a tensor F16 cannot hold: kept in f32
      converted.add_tensor(record.name, dtype == DType::f16 ? wide : wide.converted(dtype),
                           record.shape);
  }
  converted.metadata() = file.metadata();
  return converted;
}

}  // namespace bareyolo::models
