// models/export/onnx_graph.h — a thin builder over ONNX's protobuf GraphProto: named float and
// int64 constants (initializers) and nodes with their attributes. It only assembles messages;
// what the graph computes is the exporter's (onnx_export.cpp).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace bareyolo::models {

class OnnxGraph {
 public:
  explicit OnnxGraph(onnx::GraphProto& graph) : graph_(graph) {}

  // An initializer; returns its name, which later nodes take as an input.
  std::string constant(const std::string& name, const std::vector<int64_t>& dims,
                       const std::vector<float>& values);
  std::string int64_constant(const std::string& name, const std::vector<int64_t>& values);

  // A node of `op` writing the value `output` (also the node's name); set its attributes with
  // the set_attribute overloads.
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::string& output);
  // A node with several outputs (Split).
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs);

  // A graph input or output of float elements; a dimension is a number or, when `symbol` is
  // not empty for it, the symbolic name (a dynamic batch).
  void input(const std::string& name, const std::vector<int64_t>& dims,
             const std::vector<std::string>& symbols);
  void output(const std::string& name, const std::vector<int64_t>& dims,
              const std::vector<std::string>& symbols);

 private:
  onnx::GraphProto& graph_;
};

void set_attribute(onnx::NodeProto& node, const std::string& name, int64_t value);
void set_attribute(onnx::NodeProto& node, const std::string& name, float value);
void set_attribute(onnx::NodeProto& node, const std::string& name,
                   const std::vector<int64_t>& values);
void set_attribute(onnx::NodeProto& node, const std::string& name, const std::string& value);

}  // namespace bareyolo::models
