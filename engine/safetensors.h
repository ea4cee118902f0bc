// engine/safetensors.h — read and write safetensors files, the checkpoint format.
//
// Layout of a file (the format of the `safetensors` package, readable by any tool for it):
//   8 bytes   N, the header length, unsigned little-endian
//   N bytes   JSON object: {"__metadata__": {string: string}   (optional)
//                           "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]},
//                           ...}
//             padded with spaces to a multiple of 8 bytes
//   the rest  the data buffer: each tensor's bytes, little-endian, row-major, at [b, e)
//             relative to the start of the buffer.
// The tensors' regions tile the buffer exactly: no gaps, no overlaps, nothing after the last.
//
// Why safetensors: no code runs on load (unlike pickle), PyTorch and numpy read it with one
// call, and the header alone says what is inside.
//
// Reading checks every one of those rules before anything is returned, so a damaged file
// gives an exception naming the file and the rule it breaks, never a crash or half a
// result. Writing is atomic (engine/atomic_file.h): a crash or a failed write leaves either
// the old file or the new one, never a mix.
//
// A record keeps its own shape (0 or more dimensions). The engine's Tensor is 4-d: the
// conversions align a record's dimensions to the right of (n, c, h, w), the way flat_view
// lays out a vector, so [c] <-> (1,1,1,c) and [o,i,kh,kw] <-> (o,i,kh,kw).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace bareyolo {

// Bytes per element of a safetensors dtype name ("F32", "I64", "BF16", ...). Throws
// std::invalid_argument for a name the format does not define (or a sub-byte type such as
// F4, which this reader does not take).
size_t safetensors_dtype_size(const std::string& dtype);

// The safetensors dtype name of a C++ element type.
template <class T>
constexpr const char* safetensors_dtype_of();
template <>
constexpr const char* safetensors_dtype_of<float>() {
  return "F32";
}
template <>
constexpr const char* safetensors_dtype_of<double>() {
  return "F64";
}
template <>
constexpr const char* safetensors_dtype_of<int64_t>() {
  return "I64";
}
template <>
constexpr const char* safetensors_dtype_of<int32_t>() {
  return "I32";
}
template <>
constexpr const char* safetensors_dtype_of<uint8_t>() {
  return "U8";
}

// Product of the dimensions (1 for a 0-d scalar); throws on a negative dimension or overflow.
int64_t shape_numel(const std::vector<int64_t>& shape);

// One named tensor: its dtype name, its own shape and its raw little-endian bytes.
struct TensorRecord {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// The float an IEEE half (F16) holds, from its bits: exact, as every half is a float
// (subnormals, infinities and NaN included).
float f16_bits_to_float(uint16_t bits);

// The non-finite values (NaN, +-infinity) of a floating record (F64, F32, BF16, F16): how
// many, and the flat index of the first. Other dtypes hold none.
struct NonFiniteValues {
  int64_t count = 0;
  int64_t first_index = -1;
};
NonFiniteValues non_finite_values(const TensorRecord& record);
// Throws std::invalid_argument when `record` holds a non-finite value, naming `source`, the
// tensor, how many of its values and the first one's index, then `what_to_do`.
void require_finite(const TensorRecord& record, const std::string& source,
                    const std::string& what_to_do);

class SafetensorsFile {
 public:
  // ---- building ----
  // Appends a record; data is laid out in the order records are added. Throws if the name
  // is taken or reserved, the dtype unknown, or bytes.size() != numel * itemsize.
  void add(TensorRecord record);
  // Typed values with the given shape (empty shape = a 0-d scalar, e.g. num_batches_tracked).
  template <class T>
  void add_values(const std::string& name, const std::vector<T>& values,
                  std::vector<int64_t> shape);
  // An engine Tensor (any device, any layout) saved with `shape`, whose element count must
  // equal the tensor's: the Tensor is always 4-d, so only the caller knows the true rank.
  void add_tensor(const std::string& name, const Tensor& tensor, std::vector<int64_t> shape);

  std::map<std::string, std::string>& metadata() { return metadata_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The metadata entry `key` as a whole number; throws std::invalid_argument naming `source`,
  // the key and the text when it is missing or not one (metadata is text anyone can edit).
  int64_t metadata_integer(const std::string& key, const std::string& source) const;

  // ---- reading ----
  const std::vector<TensorRecord>& records() const { return records_; }
  bool contains(const std::string& name) const;
  const TensorRecord& record(const std::string& name) const;  // throws if absent
  // The values of a record whose dtype is T's (throws otherwise).
  template <class T>
  std::vector<T> values(const std::string& name) const;
  // A dense CPU Tensor of a F32/F64/I64/F16/BF16 record of 0 to 4 dimensions.
  Tensor tensor(const std::string& name) const;
  // A dense CPU f32 Tensor of a F32, BF16 or F16 record, each widened exactly (throws for
  // any other dtype).
  Tensor float_tensor(const std::string& name) const;

  // ---- files ----
  // Parses and validates a whole file image; `source` names it in error messages.
  static SafetensorsFile parse(std::span<const uint8_t> file_bytes, const std::string& source);
  static SafetensorsFile load(const std::string& path);
  // The metadata of the file at `path` alone (records() empty), reading its header but none
  // of its tensors: what a checkpoint's configuration needs, at any checkpoint size.
  static SafetensorsFile load_metadata(const std::string& path);
  // The file image: length, padded header, data.
  std::vector<uint8_t> serialize() const;
  // Atomic replace of `path`; throws std::runtime_error naming the path and the system
  // error, leaving any existing file at `path` untouched.
  void save(const std::string& path) const;

 private:
  std::string header_json() const;  // padded
  // The file as byte ranges: the length field, the header, each record's data. They point
  // into `header`, `header_bytes` and the records, which must outlive them.
  std::vector<std::span<const uint8_t>> file_pieces(const std::string& header,
                                                    const uint64_t& header_bytes) const;

  std::vector<TensorRecord> records_;
  std::map<std::string, size_t> index_;  // name -> position in records_
  std::map<std::string, std::string> metadata_;
};

// Shape conversions between a record's dimensions and the engine's Shape4 (right-aligned).
Shape4 shape4_from_dims(const std::vector<int64_t>& dims);  // throws for more than 4 dims

}  // namespace bareyolo
