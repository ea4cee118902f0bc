// models/export/onnx_graph.cpp — see onnx_graph.h.
#include "models/export/onnx_graph.h"

#include <stdexcept>

namespace bareyolo::models {

namespace {

void describe_value(onnx::ValueInfoProto& value, const std::string& name,
                    const std::vector<int64_t>& dims, const std::vector<std::string>& symbols) {
  value.set_name(name);
  onnx::TypeProto_Tensor* tensor = value.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto_DataType_FLOAT);
  for (size_t i = 0; i < dims.size(); ++i) {
    onnx::TensorShapeProto_Dimension* dim = tensor->mutable_shape()->add_dim();
    if (i < symbols.size() && !symbols[i].empty())
      dim->set_dim_param(symbols[i]);
    else
      dim->set_dim_value(dims[i]);
  }
}

onnx::AttributeProto& new_attribute(onnx::NodeProto& node, const std::string& name,
                                    onnx::AttributeProto_AttributeType type) {
  onnx::AttributeProto* attribute = node.add_attribute();
  attribute->set_name(name);
  attribute->set_type(type);
  return *attribute;
}

}  // namespace

std::string OnnxGraph::constant(const std::string& name, const std::vector<int64_t>& dims,
                                const std::vector<float>& values) {
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  if (count != int64_t(values.size()))
    throw std::logic_error("constant " + name + ": " + std::to_string(values.size()) +
                           " values for " + std::to_string(count) + " elements");
  onnx::TensorProto* tensor = graph_.add_initializer();
  tensor->set_name(name);
  tensor->set_data_type(onnx::TensorProto_DataType_FLOAT);
  for (int64_t d : dims) tensor->add_dims(d);
  // raw_data: the little-endian bytes ONNX specifies, which is how x86 holds floats.
  tensor->set_raw_data(values.data(), values.size() * sizeof(float));
  return name;
}

std::string OnnxGraph::int64_constant(const std::string& name, const std::vector<int64_t>& values) {
  onnx::TensorProto* tensor = graph_.add_initializer();
  tensor->set_name(name);
  tensor->set_data_type(onnx::TensorProto_DataType_INT64);
  tensor->add_dims(int64_t(values.size()));
  for (int64_t v : values) tensor->add_int64_data(v);
  return name;
}

onnx::NodeProto& OnnxGraph::node(const std::string& op, const std::vector<std::string>& inputs,
                                 const std::string& output) {
  return node(op, inputs, std::vector<std::string>{output});
}

onnx::NodeProto& OnnxGraph::node(const std::string& op, const std::vector<std::string>& inputs,
                                 const std::vector<std::string>& outputs) {
  onnx::NodeProto* node = graph_.add_node();
  node->set_op_type(op);
  node->set_name(outputs.front());
  for (const std::string& input : inputs) node->add_input(input);
  for (const std::string& output : outputs) node->add_output(output);
  return *node;
}

void OnnxGraph::input(const std::string& name, const std::vector<int64_t>& dims,
                      const std::vector<std::string>& symbols) {
  describe_value(*graph_.add_input(), name, dims, symbols);
}

void OnnxGraph::output(const std::string& name, const std::vector<int64_t>& dims,
                       const std::vector<std::string>& symbols) {
  describe_value(*graph_.add_output(), name, dims, symbols);
}

void set_attribute(onnx::NodeProto& node, const std::string& name, int64_t value) {
  new_attribute(node, name, onnx::AttributeProto_AttributeType_INT).set_i(value);
}

void set_attribute(onnx::NodeProto& node, const std::string& name, float value) {
  new_attribute(node, name, onnx::AttributeProto_AttributeType_FLOAT).set_f(value);
}

void set_attribute(onnx::NodeProto& node, const std::string& name,
                   const std::vector<int64_t>& values) {
  onnx::AttributeProto& attribute =
      new_attribute(node, name, onnx::AttributeProto_AttributeType_INTS);
  for (int64_t v : values) attribute.add_ints(v);
}

void set_attribute(onnx::NodeProto& node, const std::string& name, const std::string& value) {
  new_attribute(node, name, onnx::AttributeProto_AttributeType_STRING).set_s(value);
}

}  // namespace bareyolo::models
