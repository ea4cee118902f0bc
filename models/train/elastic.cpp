// models/train/elastic.cpp — see elastic.h.
#include "models/train/elastic.h"

#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>

#include "engine/atomic_file.h"
#include "engine/safetensors.h"
#include "models/train/checkpoint.h"

namespace bareyolo::models {

namespace fs = std::filesystem;

TrainOptions continue_run(const TrainOptions& request, std::string* position) {
  const fs::path last = fs::path(request.run_dir) / "weights" / "last.safetensors";
  if (!fs::is_regular_file(last)) {
    if (position) *position = "from the start: " + request.run_dir + " has no checkpoint yet";
    return request;
  }
  TrainOptions options = request;
  options.resume = last.string();
  options = resolved_request(options);
  if (position) {
    const TrainingProgress progress =
        read_checkpoint_info(SafetensorsFile::load_metadata(options.resume), options.resume)
            .progress;
    *position = "from " + options.resume + " (epoch " + std::to_string(progress.epoch) +
                ", optimizer step " + std::to_string(progress.optimizer_steps) + ")";
  }
  return options;
}

void record_elastic_run(const std::string& run_dir, const std::string& run_id) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(run_id.data());
  write_file_atomically((fs::path(run_dir) / kElasticRunIdFile).string(),
                        {std::span<const uint8_t>(bytes, run_id.size())});
}

std::optional<std::string> find_elastic_run(const std::string& project, const std::string& run_id) {
  std::optional<std::string> found;
  fs::file_time_type found_time;
  std::error_code error;
  if (!fs::is_directory(project, error)) return found;
  for (const fs::directory_entry& run : fs::directory_iterator(project, error)) {
    const fs::path record = run.path() / kElasticRunIdFile;
    if (!fs::is_regular_file(record, error)) continue;
    std::ifstream in(record);
    std::stringstream text;
    text << in.rdbuf();
    const fs::file_time_type time = fs::last_write_time(record, error);
    if (text.str() == run_id && !error && (!found || time > found_time))
      found = run.path().string(), found_time = time;
  }
  return found;
}

}  // namespace bareyolo::models
