// tools/bareyolo/resume_flags.cpp — see resume_flags.h.
#include "tools/bareyolo/resume_flags.h"

#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "models/train/checkpoint.h"
#include "tools/bareyolo/on_off_flags.h"

namespace bareyolo {

namespace {

using nlohmann::json;

// The key of the saved configuration (options_to_json) that `flag` sets, or "" for a flag
// that sets none (the launch's, --resume's own, --config, --project which finds the run).
std::string configuration_key(const std::string& flag, const json& saved) {
  static const std::map<std::string, std::string> renamed = {{"--no-val", "validate"},
                                                             {"--no-sync-bn", "sync_bn"},
                                                             {"--name", "run_dir"},
                                                             {"--exist-ok", "run_dir"},
                                                             {"--label-smoothing", "hyp"}};
  if (auto it = renamed.find(flag); it != renamed.end()) return it->second;
  std::string key = flag.substr(2);
  for (char& c : key) c = c == '-' ? '_' : c;
  return saved.contains(key) ? key : "";
}

std::string text(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// An unset sync_bn is on (options.h), as --sync-bn.
json effective(const std::string& key, const json& value) {
  return key == "sync_bn" && value.is_null() ? json(true) : value;
}

// "--imgsz 128 given, the run was started with --imgsz 640", and the like.
std::string difference(const std::string& key, const CLI::Option& option, const json& asked,
                       const json& saved) {
  const std::string flag = option.get_name();
  if (key == "hyp") {
    for (const auto& [name, value] : asked.items())
      if (saved.at(name) != value)
        return flag + " " + option.as<std::string>() + " sets " + name + " " + text(value) +
               ", the run was started with " + name + " " + text(saved.at(name));
  }
  if (key == "sync_bn")
    return flag + " given, the run was started with " +
           (effective(key, saved) == true ? "SyncBatchNorm (--sync-bn)" : "--no-sync-bn");
  if (saved.is_boolean()) {
    const bool flag_on_in_run = key == "validate" ? !saved.get<bool>() : saved.get<bool>();
    return flag + " given, the run was started " + (flag_on_in_run ? "with" : "without") + " it";
  }
  return flag + " " + text(asked) + " given, the run was started with " + flag + " " + text(saved);
}

// Whether `flag` or its opposite (on_off_flags.h: "--no-amp" for "--amp") was given.
bool given(const CLI::App& command, const std::string& flag) {
  const std::string opposite = opposite_flag(flag);
  return command.get_option(flag)->count() > 0 ||
         (!opposite.empty() && command.get_option(opposite)->count() > 0);
}

// The launch's numerics, which are not in the configuration but which a resumed run keeps
// (checkpoint.h: SavedLaunch): "--amp off given, the run was started with --amp on", or "".
std::string numerics_difference(const CLI::App& command, const models::TrainOptions& asked,
                                const models::TrainOptions& run) {
  const std::vector<models::FlagValue> asked_flags = models::numerics_flags(asked),
                                       run_flags = models::numerics_flags(run);
  std::string refused;
  for (size_t i = 0; i < asked_flags.size(); ++i) {
    const std::string flag = asked_flags[i].flag;
    if (!given(command, flag) || asked_flags[i].value == run_flags[i].value) continue;
    refused += (refused.empty() ? "" : "; ") + flag + " " + asked_flags[i].value +
               " given, the run was started with " + flag + " " + run_flags[i].value;
  }
  return refused;
}

}  // namespace

models::ResumeChanges resume_changes(const CLI::App& command, const models::TrainOptions& request,
                                     const std::function<void(const std::string&)>& note) {
  models::TrainOptions run = request;
  run.resume_changes = {};
  run = models::resolved_request(run);
  const json asked = json::parse(models::options_to_json(request));
  const json saved = json::parse(models::options_to_json(run));
  models::ResumeChanges changes;
  std::string refused;  // every difference, "; " between them
  for (const CLI::Option* option : command.get_options()) {
    const std::string flag = option->get_name();
    const std::string key = option->count() > 0 ? configuration_key(flag, saved) : "";
    if (key.empty() || effective(key, asked.at(key)) == effective(key, saved.at(key))) continue;
    if (key == "epochs" && request.epochs > run.epochs) {
      changes.epochs = request.epochs;
      note("--epochs " + std::to_string(request.epochs) + " given, the run was started with " +
           std::to_string(run.epochs) + ": it continues to " + std::to_string(request.epochs) +
           " epochs, its learning-rate schedule stretched from here on (not the schedule of a "
           "run started with " +
           std::to_string(request.epochs) + ")");
      continue;
    }
    if (key == "workers") {
      changes.workers = request.workers;
      note("--workers " + std::to_string(request.workers) + " applied (loader threads: the " +
           "results do not change)");
      continue;
    }
    refused +=
        (refused.empty() ? "" : "; ") +
        (key == "run_dir" ? flag +
                                (option->get_expected_min() > 0 ? " " + option->as<std::string>()
                                                                : std::string()) +
                                " given, the run continues in its own directory " + run.run_dir
                          : difference(key, *option, asked.at(key), saved.at(key)));
  }
  if (const std::string numerics = numerics_difference(command, request, run); !numerics.empty())
    refused += (refused.empty() ? "" : "; ") + numerics;
  if (!refused.empty())
    throw std::invalid_argument(
        "--resume continues a run as it was configured, but " + refused +
        ". Drop those flags (more --epochs are allowed), or start a new run from its weights "
        "with --weights " +
        request.resume);
  return changes;
}

}  // namespace bareyolo
