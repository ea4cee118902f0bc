// models/train/elastic.cpp — see elastic.h.
#include "models/train/elastic.h"

#include <filesystem>
#include <span>

#include "data/regular_file.h"
#include "engine/atomic_file.h"
#include "engine/safetensors.h"
#include "models/train/checkpoint.h"
#include "models/train/run_dir.h"

namespace bareyolo::models {

namespace fs = std::filesystem;

TrainOptions continue_run(const TrainOptions& request, std::string* position) {
  const std::string last = last_checkpoint(request.run_dir);
  if (!fs::is_regular_file(last)) {
    if (position) *position = "from the start: " + request.run_dir + " has no checkpoint yet";
    return request;
  }
  TrainOptions options = request;
  options.resume = last;
  options = resolved_request(options);
  if (position) {
    const CheckpointInfo info =
        read_checkpoint_info(SafetensorsFile::load_metadata(options.resume), options.resume);
    *position = "from " + options.resume + " (epoch " + std::to_string(info.progress.epoch) +
                ", optimizer step " + std::to_string(info.solver.optimizer_steps) + ")";
  }
  return options;
}

void record_elastic_run(const std::string& run_dir, const std::string& run_id) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(run_id.data());
  write_file_atomically((fs::path(run_dir) / kElasticRunIdFile).string(),
                        {std::span<const uint8_t>(bytes, run_id.size())});
}

std::optional<std::string> find_elastic_run(const std::string& project, const std::string& run_id) {
  const std::string record = newest_in_runs(
      project, kElasticRunIdFile,
      [&](const std::string& path) { return data::read_regular_file(path).bytes == run_id; });
  if (record.empty()) return std::nullopt;
  return fs::path(record).parent_path().string();
}

}  // namespace bareyolo::models
