// engine/algorithm_cache.cpp — see algorithm_cache.h.
#include "engine/algorithm_cache.h"

#include <array>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "engine/atomic_file.h"
#include "engine/json_number.h"
#include "engine/user_cache.h"

namespace bareyolo {

namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kFormat = "bareyolo convolution algorithms";
constexpr int64_t kVersion = 1;
constexpr int64_t kMaxDimension = int64_t(1) << 40;

const char* pass_name(ops::ConvolutionPass pass) {
  switch (pass) {
    case ops::ConvolutionPass::backward_data:
      return "backward-data";
    case ops::ConvolutionPass::backward_weight:
      return "backward-weight";
    default:
      return "forward";
  }
}

const char* operands_name(ops::ConvolutionOperands operands) {
  switch (operands) {
    case ops::ConvolutionOperands::tf32:
      return "tf32";
    case ops::ConvolutionOperands::bf16:
      return "bf16";
    default:
      return "float32";
  }
}

// The value of `names` whose name is `text`, or a throw naming `what` and the names allowed.
template <class Enum, size_t N>
Enum named(const std::string& text, const std::array<Enum, N>& values, const char* (*name)(Enum),
           const std::string& what) {
  std::string allowed;
  for (const Enum value : values) {
    if (text == name(value)) return value;
    allowed += std::string(allowed.empty() ? "" : ", ") + name(value);
  }
  throw std::invalid_argument(what + " is \"" + text + "\", not one of " + allowed);
}

Json choice_json(const ops::ConvolutionKey& key, const ops::ConvolutionChoice& choice) {
  Json entry = {{"pass", pass_name(key.pass)},
                {"x", {key.images, key.in_channels, key.height, key.width}},
                {"x_batch_stride", key.x_batch_stride},
                {"y_batch_stride", key.y_batch_stride},
                {"weight", {key.out_channels, key.kernel_h, key.kernel_w}},
                {"stride", {key.stride_h, key.stride_w}},
                {"pad", {key.pad_h, key.pad_w}},
                {"alignment", key.alignment},
                {"operands", operands_name(key.operands)},
                {"layout", key.channels_last ? "nhwc" : "nchw"},
                {"deterministic", key.deterministic},
                {"algorithm", choice.algorithm},
                {"math", choice.math},
                {"workspace", choice.workspace},
                {"milliseconds", choice.milliseconds}};
  // Only a broadcast carries one (a file never holds one): the field is there when true.
  if (choice.provisional) entry["provisional"] = true;
  return entry;
}

// One choice of the file; `what` names it ("choice 3 of FILE") in every error.
std::pair<ops::ConvolutionKey, ops::ConvolutionChoice> parse_choice(const Json& entry,
                                                                    const std::string& what) {
  if (!entry.is_object()) throw std::invalid_argument(what + " is not a JSON object");
  auto field = [&](const char* name) -> const Json& {
    if (!entry.contains(name)) throw std::invalid_argument(what + " has no \"" + name + "\"");
    return entry.at(name);
  };
  auto number = [&](const Json& value, const std::string& name, int64_t low = 0) {
    return json_whole_number(value, low, kMaxDimension, what + " " + name);
  };
  auto numbers = [&](const char* name, size_t count, int64_t low) {
    const Json& list = field(name);
    if (!list.is_array() || list.size() != count)
      throw std::invalid_argument(what + " \"" + name + "\" is not a list of " +
                                  std::to_string(count) + " numbers");
    std::vector<int64_t> values;
    for (size_t i = 0; i < count; ++i) values.push_back(number(list[i], name, low));
    return values;
  };
  auto text = [&](const char* name) {
    const Json& value = field(name);
    if (!value.is_string()) throw std::invalid_argument(what + " \"" + name + "\" is not text");
    return value.get<std::string>();
  };
  const Json& deterministic = field("deterministic");
  const Json& milliseconds = field("milliseconds");
  if (!deterministic.is_boolean())
    throw std::invalid_argument(what + " \"deterministic\" is not true or false");
  if (!milliseconds.is_number() || !(milliseconds.get<double>() >= 0))
    throw std::invalid_argument(what + " \"milliseconds\" is not a number >= 0");
  const Json provisional = entry.value("provisional", Json(false));  // a broadcast's only
  if (!provisional.is_boolean())
    throw std::invalid_argument(what + " \"provisional\" is not true or false");
  const std::vector<int64_t> x = numbers("x", 4, 1), weight = numbers("weight", 3, 1),
                             stride = numbers("stride", 2, 1), pad = numbers("pad", 2, 0);
  const std::string layout = text("layout");
  if (layout != "nchw" && layout != "nhwc")
    throw std::invalid_argument(what + " \"layout\" is \"" + layout + "\", not nchw or nhwc");
  ops::ConvolutionKey key{
      .pass = named(text("pass"),
                    std::array{ops::ConvolutionPass::forward, ops::ConvolutionPass::backward_data,
                               ops::ConvolutionPass::backward_weight},
                    pass_name, what + " \"pass\""),
      .images = x[0],
      .in_channels = x[1],
      .height = x[2],
      .width = x[3],
      .x_batch_stride = number(field("x_batch_stride"), "x_batch_stride", 1),
      .y_batch_stride = number(field("y_batch_stride"), "y_batch_stride", 1),
      .out_channels = weight[0],
      .kernel_h = weight[1],
      .kernel_w = weight[2],
      .stride_h = stride[0],
      .stride_w = stride[1],
      .pad_h = pad[0],
      .pad_w = pad[1],
      .alignment = number(field("alignment"), "alignment", 1),
      .operands = named(text("operands"),
                        std::array{ops::ConvolutionOperands::float32,
                                   ops::ConvolutionOperands::tf32, ops::ConvolutionOperands::bf16},
                        operands_name, what + " \"operands\""),
      .channels_last = layout == "nhwc",
      .deterministic = deterministic.get<bool>()};
  const ops::ConvolutionChoice choice{.algorithm = int(number(field("algorithm"), "algorithm")),
                                      .math = int(number(field("math"), "math")),
                                      .workspace = number(field("workspace"), "workspace"),
                                      .milliseconds = milliseconds.get<double>(),
                                      .provisional = provisional.get<bool>()};
  return {key, choice};
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw std::invalid_argument("cannot read " + path.string());
  return text.str();
}

std::string count_text(size_t count) {
  return std::to_string(count) + (count == 1 ? " choice" : " choices");
}

}  // namespace

std::string convolution_choices_json(const std::string& identity,
                                     const ops::ConvolutionChoices& choices) {
  // One choice a line: a file a person can read and diff.
  std::string text = "{\"format\": " + Json(kFormat).dump() +
                     ", \"version\": " + std::to_string(kVersion) +
                     ", \"identity\": " + Json(identity).dump() + ",\n \"choices\": [";
  const char* separator = "\n  ";
  for (const auto& [key, choice] : choices)
    text += std::exchange(separator, ",\n  ") + choice_json(key, choice).dump();
  return text + "]}\n";
}

CachedChoices parse_convolution_choices(const std::string& text, const std::string& source) {
  const Json file = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (file.is_discarded() || !file.is_object())
    throw std::invalid_argument(source + " is not a JSON object");
  if (file.value("format", "") != kFormat)
    throw std::invalid_argument(source + " is not a file of \"" + kFormat + "\"");
  if (!file.contains("version") || !file["version"].is_number_integer() ||
      file["version"].get<int64_t>() != kVersion)
    throw std::invalid_argument(source + " is not of version " + std::to_string(kVersion));
  if (!file.contains("identity") || !file["identity"].is_string())
    throw std::invalid_argument(source + " names no \"identity\"");
  if (!file.contains("choices") || !file["choices"].is_array())
    throw std::invalid_argument(source + " has no list of \"choices\"");
  CachedChoices cached{file["identity"].get<std::string>(), {}};
  const Json& list = file["choices"];
  for (size_t i = 0; i < list.size(); ++i)
    cached.choices.insert(parse_choice(list[i], "choice " + std::to_string(i) + " of " + source));
  return cached;
}

std::filesystem::path algorithm_cache_path(const std::string& identity) {
  // The identity spelled with letters, digits and dashes: "NVIDIA-H200-sm_90-cuDNN-9.10.2".
  std::string name = "convolution-algorithms";
  bool dash = true;
  for (const char c : identity) {
    const bool kept = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_';
    if (kept) {
      if (dash) name += '-';
      name += c;
    }
    dash = !kept;
  }
  return user_cache_folder() / (name + ".json");
}

std::optional<ops::ConvolutionChoices> read_algorithm_cache(const std::filesystem::path& path,
                                                            const std::string& identity,
                                                            std::string& why_not) {
  why_not.clear();
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return std::nullopt;
  try {
    CachedChoices cached = parse_convolution_choices(read_text(path), path.string());
    if (cached.identity == identity) return std::move(cached.choices);
    why_not = path.string() + " was made on " + cached.identity + ", not on this " + identity;
  } catch (const std::invalid_argument& e) {
    why_not = e.what();
  }
  return std::nullopt;
}

size_t write_algorithm_cache(const std::filesystem::path& path, const std::string& identity,
                             const ops::ConvolutionChoices& choices) {
  std::string ignored;  // a file of another identity, or damaged, is replaced
  ops::ConvolutionChoices merged =
      read_algorithm_cache(path, identity, ignored).value_or(ops::ConvolutionChoices{});
  for (const auto& [key, choice] : choices)
    if (!choice.provisional) merged[key] = choice;
  std::filesystem::create_directories(path.parent_path());
  const std::string text = convolution_choices_json(identity, merged);
  write_file_atomically(path.string(),
                        {{reinterpret_cast<const uint8_t*>(text.data()), text.size()}});
  return merged.size();
}

std::string load_algorithm_cache(const Device& device) {
  const std::string identity = ops::convolution_choices_identity(device);
  if (identity.empty()) return "";
  const std::filesystem::path path = algorithm_cache_path(identity);
  std::string why_not;
  const std::optional<ops::ConvolutionChoices> cached =
      read_algorithm_cache(path, identity, why_not);
  if (!cached)
    return why_not.empty() ? ""
                           : "cuDNN algorithms: ignored " + why_not +
                                 " (the file is rewritten at the next save)";
  ops::adopt_convolution_choices(device, *cached);
  ops::mark_convolution_choices_saved(device);
  return "cuDNN algorithms: " + count_text(cached->size()) + " from " + path.string();
}

std::string save_algorithm_cache(const Device& device) {
  const std::string identity = ops::convolution_choices_identity(device);
  if (identity.empty() || !ops::convolution_choices_changed_since_saved(device)) return "";
  const std::filesystem::path path = algorithm_cache_path(identity);
  try {
    const size_t saved = write_algorithm_cache(path, identity, ops::convolution_choices(device));
    ops::mark_convolution_choices_saved(device);
    return "cuDNN algorithms: " + count_text(saved) + " saved to " + path.string();
  } catch (const std::exception& e) {
    return std::string("warning: cuDNN algorithms not saved: ") + e.what();
  }
}

}  // namespace bareyolo
