// models/yolo/weights.cpp — see weights.h.
#include "models/yolo/weights.h"

#include <stdexcept>

namespace bareyolo::models {

namespace {
std::string dims_text(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}
}  // namespace

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
    Tensor t = file.tensor(name);
    if (t.dtype() != e.value->dtype() &&
        !(t.dtype() == DType::f32 && e.value->dtype() == DType::f64))
      throw std::invalid_argument(source + ": '" + name + "' holds " + record.dtype +
                                  ", the model expects " + dtype_name(e.value->dtype()));
    loaded.push_back(t);
  }
  for (size_t i = 0; i < state.size(); ++i) {
    Tensor& target = *state[i].value;
    if (loaded[i].dtype() == target.dtype()) {
      target.copy_from(loaded[i].reshape(target.shape()));
    } else {  // float32 file into a double model
      std::vector<double> values = loaded[i].to_doubles();
      target.copy_from(Tensor::from_vector(values, target.shape()));
    }
  }
}

}  // namespace bareyolo::models
