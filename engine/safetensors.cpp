// engine/safetensors.cpp — safetensors parsing with full validation, and serialisation. The
// format and the rules are described in the header.
#include "engine/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <tuple>

#include "engine/atomic_file.h"

namespace bareyolo {

// The format stores little-endian data and we copy it byte for byte.
static_assert(std::endian::native == std::endian::little,
              "safetensors.cpp copies raw little-endian data: a big-endian host needs byte swaps");

namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr const char* kMetadataKey = "__metadata__";
// The reference implementation refuses headers above 100 MB; so do we, before allocating.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw std::runtime_error("safetensors file '" + source + "': " + what);
}

std::string range_str(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// ---- header entries -----------------------------------------------------------------------

// A tensor as the header describes it, before its bytes are copied.
struct HeaderEntry {
  TensorRecord record;  // bytes still empty
  uint64_t begin = 0, end = 0;
};

uint64_t non_negative_integer(const OrderedJson& value, const std::string& source,
                              const std::string& what) {
  if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<int64_t>() < 0))
    fail(source, what + " must be a non-negative integer, got " + value.dump());
  return value.get<uint64_t>();
}

HeaderEntry parse_entry(const std::string& name, const OrderedJson& info,
                        const std::string& source) {
  const std::string where = "tensor '" + name + "'";
  if (!info.is_object()) fail(source, where + ": entry must be a JSON object, got " + info.dump());
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!info.contains(key)) fail(source, where + ": missing \"" + key + "\"");

  HeaderEntry entry;
  entry.record.name = name;
  if (!info["dtype"].is_string()) fail(source, where + ": \"dtype\" must be a string");
  entry.record.dtype = info["dtype"].get<std::string>();
  size_t item_bytes = 0;
  try {
    item_bytes = safetensors_dtype_size(entry.record.dtype);
  } catch (const std::invalid_argument& e) {
    fail(source, where + ": " + e.what());
  }

  const OrderedJson& shape = info["shape"];
  if (!shape.is_array()) fail(source, where + ": \"shape\" must be an array");
  for (const OrderedJson& dim : shape) {
    uint64_t size = non_negative_integer(dim, source, where + ": every shape dimension");
    if (size > static_cast<uint64_t>(INT64_MAX)) fail(source, where + ": dimension too large");
    entry.record.shape.push_back(static_cast<int64_t>(size));
  }

  const OrderedJson& offsets = info["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    fail(source, where + ": \"data_offsets\" must be [begin, end], got " + offsets.dump());
  entry.begin = non_negative_integer(offsets[0], source, where + ": data_offsets begin");
  entry.end = non_negative_integer(offsets[1], source, where + ": data_offsets end");
  if (entry.end < entry.begin)
    fail(source,
         where + ": data_offsets " + range_str(entry.begin, entry.end) + " end before they begin");

  uint64_t expected_bytes = 0;
  int64_t numel = 0;
  try {
    numel = shape_numel(entry.record.shape);
  } catch (const std::exception& e) {
    fail(source, where + ": " + e.what());
  }
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), item_bytes, &expected_bytes))
    fail(source, where + ": shape too large");
  if (entry.end - entry.begin != expected_bytes)
    fail(source, where + ": data_offsets " + range_str(entry.begin, entry.end) + " hold " +
                     std::to_string(entry.end - entry.begin) + " bytes, but dtype " +
                     entry.record.dtype + " with " + std::to_string(numel) + " elements needs " +
                     std::to_string(expected_bytes));
  return entry;
}

std::map<std::string, std::string> parse_metadata(const OrderedJson& value,
                                                  const std::string& source) {
  if (!value.is_object()) fail(source, "\"__metadata__\" must be a JSON object of strings");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string())
      fail(source, "\"__metadata__\" value for \"" + key +
                       "\" must be a string (put nested data in as JSON text), got " + item.dump());
    metadata[key] = item.get<std::string>();
  }
  return metadata;
}

// The header's JSON; a key given twice at the top level is refused (a JSON parser would
// silently keep one of them).
OrderedJson parse_header_json(std::span<const uint8_t> header, const std::string& source) {
  std::set<std::string> top_level_keys;
  auto reject_duplicates = [&](int depth, OrderedJson::parse_event_t event, OrderedJson& parsed) {
    if (depth == 1 && event == OrderedJson::parse_event_t::key &&
        !top_level_keys.insert(parsed.get<std::string>()).second)
      fail(source, "header names \"" + parsed.get<std::string>() + "\" twice");
    return true;
  };
  OrderedJson json;
  try {
    json = OrderedJson::parse(header.begin(), header.end(), reject_duplicates);
  } catch (const nlohmann::json::exception& e) {
    fail(source, std::string("header is not valid JSON: ") + e.what());
  }
  if (!json.is_object())
    fail(source, "header must be a JSON object, got a " + std::string(json.type_name()));
  return json;
}

// The regions must tile [0, buffer_bytes) exactly; `entries` is sorted by (begin, end).
void check_layout(const std::vector<HeaderEntry>& entries, uint64_t buffer_bytes,
                  const std::string& source) {
  for (const HeaderEntry& e : entries)
    if (e.end > buffer_bytes)
      fail(source, "tensor '" + e.record.name + "': data_offsets " + range_str(e.begin, e.end) +
                       " lie outside the data buffer of " + std::to_string(buffer_bytes) +
                       " bytes (truncated file?)");
  uint64_t covered = 0;
  const std::string* previous = nullptr;
  for (const HeaderEntry& e : entries) {
    if (e.begin > covered)
      fail(source, "gap in the data buffer: bytes " + range_str(covered, e.begin) +
                       " before tensor '" + e.record.name + "' belong to no tensor");
    if (e.begin < covered)
      fail(source, "tensor '" + e.record.name + "' at " + range_str(e.begin, e.end) +
                       " overlaps tensor '" + *previous + "', which ends at " +
                       std::to_string(covered));
    covered = e.end;
    previous = &e.record.name;
  }
  if (covered != buffer_bytes)
    fail(source, "the tensors cover " + std::to_string(covered) +
                     " bytes of data but the file has " + std::to_string(buffer_bytes) +
                     " after the header (trailing bytes)");
}

}  // namespace

// ---- dtypes and shapes ----------------------------------------------------------------------

size_t safetensors_dtype_size(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"C64", 8}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  auto it = sizes.find(dtype);
  if (it == sizes.end())
    throw std::invalid_argument("unknown dtype \"" + dtype +
                                "\" (known: BOOL, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, I16, U16, "
                                "F16, BF16, I32, U32, F32, C64, F64, I64, U64)");
  return it->second;
}

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t dim : shape) {
    if (dim < 0) throw std::invalid_argument("negative dimension " + std::to_string(dim));
    if (__builtin_mul_overflow(numel, dim, &numel))
      throw std::invalid_argument("element count overflows 64 bits");
  }
  return numel;
}

int64_t SafetensorsFile::metadata_integer(const std::string& key, const std::string& source) const {
  const auto entry = metadata_.find(key);
  if (entry == metadata_.end())
    throw std::invalid_argument(source + ": the metadata has no '" + key + "' entry");
  const std::string& text = entry->second;
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    throw std::invalid_argument(source + ": metadata '" + key + "' is '" + text +
                                "', not a whole number");
  return value;
}

float f16_bits_to_float(uint16_t bits) {
  const uint32_t sign = uint32_t(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1F, mantissa = bits & 0x3FF;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = std::ldexp(float(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  // Infinity and NaN keep an all-ones exponent (and NaN its payload); a normal number's
  // exponent is rebiased from 15 to 127.
  const uint32_t float_exponent = exponent == 0x1F ? 0xFF : exponent + (127 - 15);
  return std::bit_cast<float>(sign | (float_exponent << 23) | (mantissa << 13));
}

namespace {
// A float of any width is non-finite exactly when its exponent bits are all ones.
template <class Bits>
NonFiniteValues non_finite_with_exponent(const std::vector<uint8_t>& bytes, Bits exponent) {
  NonFiniteValues found;
  const size_t count = bytes.size() / sizeof(Bits);
  for (size_t i = 0; i < count; ++i) {
    Bits value;
    std::memcpy(&value, bytes.data() + i * sizeof(Bits), sizeof(Bits));
    if ((value & exponent) == exponent && found.count++ == 0) found.first_index = int64_t(i);
  }
  return found;
}
}  // namespace

NonFiniteValues non_finite_values(const TensorRecord& record) {
  if (record.dtype == "F64")
    return non_finite_with_exponent<uint64_t>(record.bytes, 0x7FF0000000000000);
  if (record.dtype == "F32") return non_finite_with_exponent<uint32_t>(record.bytes, 0x7F800000);
  if (record.dtype == "BF16") return non_finite_with_exponent<uint16_t>(record.bytes, 0x7F80);
  if (record.dtype == "F16") return non_finite_with_exponent<uint16_t>(record.bytes, 0x7C00);
  return {};
}

void require_finite(const TensorRecord& record, const std::string& source,
                    const std::string& what_to_do) {
  const NonFiniteValues found = non_finite_values(record);
  if (found.count == 0) return;
  const int64_t numel = shape_numel(record.shape);
  throw std::invalid_argument(source + ": tensor '" + record.name + "' holds " +
                              std::to_string(found.count) + " non-finite value" +
                              (found.count > 1 ? "s" : "") + " (NaN or infinity) among its " +
                              std::to_string(numel) + ", the first at index " +
                              std::to_string(found.first_index) + "; " + what_to_do);
}

Shape4 shape4_from_dims(const std::vector<int64_t>& dims) {
  if (dims.size() > 4)
    throw std::invalid_argument("a " + std::to_string(dims.size()) +
                                "-d tensor does not fit the engine's 4-d Tensor");
  int64_t padded[4] = {1, 1, 1, 1};
  std::copy(dims.begin(), dims.end(), padded + (4 - dims.size()));
  return {padded[0], padded[1], padded[2], padded[3]};
}

namespace {
// The safetensors names of the dtypes the engine's Tensor can hold.
constexpr std::pair<DType, const char*> kEngineDtypes[] = {
    {DType::f32, "F32"}, {DType::f64, "F64"},   {DType::i64, "I64"},
    {DType::f16, "F16"}, {DType::bf16, "BF16"}, {DType::u8, "U8"}};

DType engine_dtype(const std::string& dtype, const std::string& name) {
  for (const auto& [engine, safetensors] : kEngineDtypes)
    if (dtype == safetensors) return engine;
  throw std::invalid_argument(
      "tensor '" + name + "' has dtype " + dtype +
      ", which the engine's Tensor cannot hold (F32, F64, I64, F16, BF16, U8)");
}
// memcpy with a null pointer is undefined even for 0 bytes, and an empty vector's data() may
// be null.
void copy_record_bytes(const TensorRecord& record, void* destination) {
  if (!record.bytes.empty()) std::memcpy(destination, record.bytes.data(), record.bytes.size());
}

const char* safetensors_dtype_name(DType dtype) {
  for (const auto& [engine, safetensors] : kEngineDtypes)
    if (dtype == engine) return safetensors;
  throw std::invalid_argument(std::string("no safetensors name for dtype ") + dtype_name(dtype));
}
}  // namespace

// ---- building -------------------------------------------------------------------------------

void SafetensorsFile::add(TensorRecord record) {
  const std::string where = "safetensors: tensor '" + record.name + "'";
  if (record.name == kMetadataKey) throw std::invalid_argument(where + ": the name is reserved");
  if (contains(record.name)) throw std::invalid_argument(where + " added twice");
  size_t expected =
      static_cast<size_t>(shape_numel(record.shape)) * safetensors_dtype_size(record.dtype);
  if (record.bytes.size() != expected)
    throw std::invalid_argument(where + ": " + std::to_string(record.bytes.size()) +
                                " bytes given, dtype and shape need " + std::to_string(expected));
  index_[record.name] = records_.size();
  records_.push_back(std::move(record));
}

template <class T>
void SafetensorsFile::add_values(const std::string& name, const std::vector<T>& values,
                                 std::vector<int64_t> shape) {
  const auto* first = reinterpret_cast<const uint8_t*>(values.data());
  add({name, safetensors_dtype_of<T>(), std::move(shape),
       std::vector<uint8_t>(first, first + values.size() * sizeof(T))});
}

void SafetensorsFile::add_tensor(const std::string& name, const Tensor& tensor,
                                 std::vector<int64_t> shape) {
  if (!tensor.defined())
    throw std::invalid_argument("safetensors: tensor '" + name + "' is undefined");
  if (shape_numel(shape) != tensor.numel())
    throw std::invalid_argument("safetensors: tensor '" + name + "' has " +
                                std::to_string(tensor.numel()) + " elements, which shape [" +
                                OrderedJson(shape).dump() + "] does not hold");
  Tensor host = tensor.to(Device::cpu());  // dense
  size_t item_bytes = dtype_size(host.dtype());
  const auto* first =
      static_cast<const uint8_t*>(host.storage()->data()) + host.offset() * item_bytes;
  add({name, safetensors_dtype_name(host.dtype()), std::move(shape),
       std::vector<uint8_t>(first, first + host.numel() * item_bytes)});
}

// ---- reading --------------------------------------------------------------------------------

bool SafetensorsFile::contains(const std::string& name) const { return index_.count(name) > 0; }

const TensorRecord& SafetensorsFile::record(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw std::out_of_range("safetensors: no tensor named '" + name + "'");
  return records_[it->second];
}

template <class T>
std::vector<T> SafetensorsFile::values(const std::string& name) const {
  const TensorRecord& r = record(name);
  if (r.dtype != safetensors_dtype_of<T>())
    throw std::invalid_argument("safetensors: tensor '" + name + "' has dtype " + r.dtype +
                                ", not " + safetensors_dtype_of<T>());
  std::vector<T> result(r.bytes.size() / sizeof(T));
  copy_record_bytes(r, result.data());
  return result;
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const TensorRecord& r = record(name);
  Tensor result =
      Tensor::empty(shape4_from_dims(r.shape), Device::cpu(), engine_dtype(r.dtype, name));
  copy_record_bytes(r, result.storage()->data());
  return result;
}

Tensor SafetensorsFile::float_tensor(const std::string& name) const {
  const TensorRecord& r = record(name);
  if (r.dtype == "F32") return tensor(name);
  if (r.dtype == "BF16") return tensor(name).converted(DType::f32);
  if (r.dtype != "F16")
    throw std::invalid_argument("safetensors: tensor '" + name + "' has dtype " + r.dtype +
                                ", not a floating one of F32, BF16 or F16");
  std::vector<float> widened(r.bytes.size() / 2);
  for (size_t i = 0; i < widened.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, r.bytes.data() + 2 * i, 2);
    widened[i] = f16_bits_to_float(bits);
  }
  return Tensor::from_vector(widened, shape4_from_dims(r.shape));
}

#define BAREYOLO_SAFETENSORS_VALUE_TYPE(T)                                                \
  template void SafetensorsFile::add_values<T>(const std::string&, const std::vector<T>&, \
                                               std::vector<int64_t>);                     \
  template std::vector<T> SafetensorsFile::values<T>(const std::string&) const;
BAREYOLO_SAFETENSORS_VALUE_TYPE(float)
BAREYOLO_SAFETENSORS_VALUE_TYPE(double)
BAREYOLO_SAFETENSORS_VALUE_TYPE(int64_t)
BAREYOLO_SAFETENSORS_VALUE_TYPE(int32_t)
BAREYOLO_SAFETENSORS_VALUE_TYPE(uint8_t)
#undef BAREYOLO_SAFETENSORS_VALUE_TYPE

// ---- files ----------------------------------------------------------------------------------

namespace {
void require_regular_file(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    throw std::runtime_error("cannot load safetensors file '" + path +
                             "': " + (error ? error.message() : "not a regular file"));
}

// The header length a file states, against the limit and the file's size.
void check_header_bytes(uint64_t header_bytes, uint64_t file_bytes, const std::string& source) {
  if (header_bytes > kMaxHeaderBytes)
    fail(source, "header length " + std::to_string(header_bytes) + " exceeds the " +
                     std::to_string(kMaxHeaderBytes) + "-byte limit (not a safetensors file?)");
  if (8 + header_bytes > file_bytes)
    fail(source, "header length " + std::to_string(header_bytes) + " runs past the end of the " +
                     std::to_string(file_bytes) + "-byte file (truncated file?)");
}
}  // namespace

SafetensorsFile SafetensorsFile::parse(std::span<const uint8_t> file_bytes,
                                       const std::string& source) {
  if (file_bytes.size() < 8)
    fail(source, "is " + std::to_string(file_bytes.size()) +
                     " bytes long, too short for the 8-byte header length");
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file_bytes.data(), 8);
  check_header_bytes(header_bytes, file_bytes.size(), source);
  std::span<const uint8_t> data = file_bytes.subspan(8 + header_bytes);

  OrderedJson header = parse_header_json(file_bytes.subspan(8, header_bytes), source);
  SafetensorsFile file;
  std::vector<HeaderEntry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey)
      file.metadata_ = parse_metadata(value, source);
    else
      entries.push_back(parse_entry(key, value, source));
  }
  std::stable_sort(entries.begin(), entries.end(), [](const HeaderEntry& a, const HeaderEntry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  check_layout(entries, data.size(), source);

  for (HeaderEntry& entry : entries) {
    entry.record.bytes.assign(data.begin() + static_cast<ptrdiff_t>(entry.begin),
                              data.begin() + static_cast<ptrdiff_t>(entry.end));
    file.add(std::move(entry.record));
  }
  return file;
}

SafetensorsFile SafetensorsFile::load(const std::string& path) {
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::vector<uint8_t> bytes(in ? static_cast<size_t>(in.tellg()) : 0);
  in.seekg(0);
  if (!in ||
      !in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
    throw std::runtime_error("cannot read safetensors file '" + path +
                             "': " + std::strerror(errno));
  return parse(bytes, path);
}

SafetensorsFile SafetensorsFile::load_metadata(const std::string& path) {
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    throw std::runtime_error("cannot read safetensors file '" + path +
                             "': " + std::strerror(errno));
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  if (size < 8)
    fail(path,
         "is " + std::to_string(size) + " bytes long, too short for the 8-byte header length");
  uint64_t header_bytes = 0;
  in.seekg(0);
  in.read(reinterpret_cast<char*>(&header_bytes), 8);
  check_header_bytes(header_bytes, size, path);
  std::vector<uint8_t> header(header_bytes);
  if (!in.read(reinterpret_cast<char*>(header.data()), static_cast<std::streamsize>(header_bytes)))
    throw std::runtime_error("cannot read safetensors file '" + path +
                             "': " + std::strerror(errno));
  SafetensorsFile file;
  const OrderedJson parsed = parse_header_json(header, path);
  if (parsed.contains(kMetadataKey)) file.metadata_ = parse_metadata(parsed[kMetadataKey], path);
  return file;
}

std::string SafetensorsFile::header_json() const {
  OrderedJson header = OrderedJson::object();
  if (!metadata_.empty()) header[kMetadataKey] = metadata_;
  uint64_t offset = 0;
  for (const TensorRecord& r : records_) {
    header[r.name] = {{"dtype", r.dtype},
                      {"shape", r.shape},
                      {"data_offsets", {offset, offset + r.bytes.size()}}};
    offset += r.bytes.size();
  }
  std::string text = header.dump();
  // Padded with spaces to a multiple of 8, as the reference writer does, so the data
  // buffer starts 8-byte aligned in the file.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

std::vector<std::span<const uint8_t>> SafetensorsFile::file_pieces(
    const std::string& header, const uint64_t& header_bytes) const {
  std::vector<std::span<const uint8_t>> pieces = {
      {reinterpret_cast<const uint8_t*>(&header_bytes), 8},
      {reinterpret_cast<const uint8_t*>(header.data()), header.size()}};
  for (const TensorRecord& r : records_) pieces.emplace_back(r.bytes);
  return pieces;
}

std::vector<uint8_t> SafetensorsFile::serialize() const {
  std::string header = header_json();
  uint64_t header_bytes = header.size();
  std::vector<uint8_t> out;
  for (auto piece : file_pieces(header, header_bytes))
    out.insert(out.end(), piece.begin(), piece.end());
  return out;
}

void SafetensorsFile::save(const std::string& path) const {
  std::string header = header_json();
  uint64_t header_bytes = header.size();
  write_file_atomically(path, file_pieces(header, header_bytes));
}

}  // namespace bareyolo
