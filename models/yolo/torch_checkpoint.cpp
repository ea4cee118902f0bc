// models/yolo/torch_checkpoint.cpp — see torch_checkpoint.h.
#include "models/yolo/torch_checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "engine/torch_pickle.h"

namespace bareyolo::models {

namespace {

using Kind = PickleValue::Kind;

// YOLOv5's modules nest 4 deep (model.24.m.0); a pickle that contains itself must not recurse
// without end.
constexpr int kMaxDepth = 32;

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw std::invalid_argument(source + ": " + what);
}

std::string class_name(const PickleValue& object) {
  const size_t dot = object.text.rfind('.');
  return dot == std::string::npos ? object.text : object.text.substr(dot + 1);
}

// Appends `module`'s state_dict entries under `prefix`, as nn.Module.state_dict orders them.
void add_module_state(SafetensorsFile& file, const PickleValue& module, const std::string& prefix,
                      int depth, const std::string& source) {
  if (depth > kMaxDepth) fail(source, "modules nested deeper than " + std::to_string(kMaxDepth));
  const PickleValue* state = module.state;
  if (module.kind != Kind::object || !state || state->kind != Kind::dict)
    fail(source, "'" + prefix + "' is not a module with its attributes");
  std::vector<std::string> non_persistent;
  if (const PickleValue* names = state->get("_non_persistent_buffers_set"))
    for (const PickleValue* name : names->items)
      if (name->kind == Kind::text) non_persistent.push_back(name->text);
  for (const char* group : {"_parameters", "_buffers"}) {
    const PickleValue* tensors = state->get(group);
    if (!tensors) continue;
    for (const auto& [key, value] : tensors->entries) {
      if (key->kind != Kind::text) fail(source, "a tensor of '" + prefix + "' has no name");
      if (value->is_none() || std::find(non_persistent.begin(), non_persistent.end(), key->text) !=
                                  non_persistent.end())
        continue;
      if (value->kind != Kind::tensor) fail(source, "'" + prefix + key->text + "' is not a tensor");
      TensorRecord record = value->tensor;
      record.name = prefix + key->text;
      file.add(std::move(record));
    }
  }
  if (const PickleValue* children = state->get("_modules"))
    for (const auto& [key, child] : children->entries) {
      if (child->is_none()) continue;
      if (key->kind != Kind::text) fail(source, "a module of '" + prefix + "' has no name");
      add_module_state(file, *child, prefix + key->text + ".", depth + 1, source);
    }
}

// A plain value as yaml flow text (the model yaml, from the dict YOLOv5 keeps).
void append_yaml(std::string& out, const PickleValue& v, int depth, const std::string& source) {
  if (depth > kMaxDepth)
    fail(source, "the model yaml nests deeper than " + std::to_string(kMaxDepth));
  switch (v.kind) {
    case Kind::none:
      out += "None";
      return;
    case Kind::boolean:
      out += v.flag ? "True" : "False";
      return;
    case Kind::integer:
      out += std::to_string(v.integer);
      return;
    case Kind::floating: {
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", v.number);  // reads back as the same double
      out += text;
      return;
    }
    case Kind::text: {
      bool bare = !v.text.empty() && (std::isalpha(uint8_t(v.text[0])) || v.text[0] == '_');
      for (char c : v.text) bare = bare && (std::isalnum(uint8_t(c)) || c == '_' || c == '.');
      if (bare) {  // a name: nc, anchors, Conv, nn.Upsample, nearest
        out += v.text;
        return;
      }
      out += '"';
      for (char c : v.text) {
        if (c == '"' || c == '\\') out += '\\';
        if (uint8_t(c) < 0x20) fail(source, "the model yaml holds a control character");
        out += c;
      }
      out += '"';
      return;
    }
    case Kind::list:
    case Kind::tuple:
      out += '[';
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) out += ", ";
        append_yaml(out, *v.items[i], depth + 1, source);
      }
      out += ']';
      return;
    case Kind::dict:
      out += '{';
      for (size_t i = 0; i < v.entries.size(); ++i) {
        if (i) out += ", ";
        append_yaml(out, *v.entries[i].first, depth + 1, source);
        out += ": ";
        append_yaml(out, *v.entries[i].second, depth + 1, source);
      }
      out += '}';
      return;
    default:
      fail(source, "the model yaml holds something other than plain values");
  }
}

// The class names, one per line, from YOLOv5's list or {index: name} dict.
std::string names_text(const PickleValue& names, const std::string& source) {
  std::vector<std::string> ordered;
  if (names.kind == Kind::list) {
    for (const PickleValue* name : names.items) {
      if (name->kind != Kind::text) fail(source, "a class name is not text");
      ordered.push_back(name->text);
    }
  } else if (names.kind == Kind::dict) {
    ordered.resize(names.entries.size());
    for (const auto& [index, name] : names.entries) {
      if (index->kind != Kind::integer || index->integer < 0 ||
          uint64_t(index->integer) >= ordered.size() || name->kind != Kind::text)
        fail(source, "the class names are not {0: name, 1: name, ...}");
      ordered[size_t(index->integer)] = name->text;
    }
  } else {
    fail(source, "the model's names are neither a list nor a dict");
  }
  std::string joined;
  for (const std::string& name : ordered) {
    if (name.find('\n') != std::string::npos) fail(source, "a class name holds a line break");
    joined += (joined.empty() ? "" : "\n") + name;
  }
  return joined;
}

std::string stride_text(const PickleValue& stride, const std::string& source) {
  if (stride.kind != Kind::tensor || stride.tensor.shape.size() != 1)
    fail(source, "the model's stride is not a vector");
  SafetensorsFile one;
  TensorRecord record = stride.tensor;
  record.name = "stride";
  one.add(std::move(record));
  std::string text;
  for (float s : one.float_tensor("stride").to_vector<float>())
    text += (text.empty() ? "" : ",") + std::to_string(int64_t(s));
  return text;
}

}  // namespace

SafetensorsFile torch_checkpoint_weights(const TorchZip& zip) {
  const std::string& source = zip.source();
  const TorchPickle pickle = TorchPickle::read(zip);
  const PickleValue& root = pickle.root();
  if (root.kind != Kind::dict)
    fail(source, "the pickle holds no checkpoint dict (a YOLOv5 checkpoint holds 'model')");
  // As YOLOv5 loads a checkpoint: the EMA when training kept one, else the model.
  const PickleValue* model = root.get("ema");
  if (!model || model->is_none()) model = root.get("model");
  if (!model || model->is_none())
    fail(source,
         "the checkpoint holds neither 'ema' nor 'model' (a bare state_dict or another "
         "tool's file?): bareyolo reads YOLOv5's train.py checkpoints");
  if (model->kind != Kind::object ||
      (class_name(*model) != "DetectionModel" && class_name(*model) != "Model"))
    fail(source, "its model is a " + (model->kind == Kind::object ? model->text : "plain value") +
                     ", not a YOLOv5 DetectionModel");
  SafetensorsFile file;
  add_module_state(file, *model, "", 0, source);
  if (file.records().empty()) fail(source, "the model holds no tensors");

  const PickleValue* yaml = model->state->get("yaml");
  if (!yaml || yaml->kind != Kind::dict)
    fail(source, "the model carries no yaml dict (not a YOLOv5 model built from a yaml)");
  std::string yaml_text;
  append_yaml(yaml_text, *yaml, 0, source);
  file.metadata()["yaml"] = yaml_text;
  const PickleValue* nc = yaml->get("nc");
  if (!nc || nc->kind != Kind::integer) fail(source, "the model yaml has no whole 'nc'");
  file.metadata()["nc"] = std::to_string(nc->integer);
  if (const PickleValue* names = model->state->get("names"))
    file.metadata()["names"] = names_text(*names, source);
  if (const PickleValue* stride = model->state->get("stride"))
    file.metadata()["stride"] = stride_text(*stride, source);
  file.metadata()["format"] = "yolov5-pt";
  return file;
}

bool is_torch_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint8_t signature[4] = {};
  in.read(reinterpret_cast<char*>(signature), 4);
  return TorchZip::looks_like_zip(std::span<const uint8_t>(signature, size_t(in.gcount())));
}

SafetensorsFile read_torch_checkpoint(const std::string& path) {
  return torch_checkpoint_weights(TorchZip::load(path));
}

}  // namespace bareyolo::models
