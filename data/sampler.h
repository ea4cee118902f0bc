// data/sampler.h — which images each rank trains on at each step (our distributed sampler).
//
// Unlike YOLOv5 (a fixed 1/W subset per rank, reshuffled within itself), every epoch is ONE
// global sequence, the same on all ranks and for every world size:
//   1. a permutation of the dataset from (seed, epoch) (Fisher-Yates on SampleRng(seed, epoch,
//      kShuffleStream)), or without shuffling a fixed order: 0..n-1, or the one given (--rect:
//      by aspect ratio);
//   2. padded, by repeating it from its start, to a multiple of the GLOBAL batch B (or cut
//      down to one with drop_last) — depending on n and B only, never on the world size;
//   3. global step t takes positions [t*B, (t+1)*B); rank r takes the contiguous share
//      [t*B + r*B/W, t*B + (r+1)*B/W).
// Invariant (tested): at every step the union of the W ranks' micro-batches is exactly the
// batch a single rank with B gets — so W ranks of B/W train on what one rank of B would.
// A position is also the key of the sample's augmentation RNG (sample.h), which is why
// padding repeats an image but never its augmentation.
#pragma once

#include <cstdint>
#include <vector>

namespace bareyolo::data {

// One rank's micro-batch at one step: dataset indices and their positions in the epoch.
struct Step {
  int64_t step = 0;
  std::vector<int64_t> indices;
  std::vector<int64_t> positions;
  int width = 0, height = 0;  // the size every sample of the batch is built at
  // --multi-scale: the network input size the batch is resized to on the device
  // (Batch::images_tensor); 0: width x height.
  int input_width = 0, input_height = 0;
};

struct SamplerOptions {
  int64_t dataset_size = 0;
  int global_batch = 16;  // over all ranks
  int world_size = 1;
  int rank = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  // Without shuffling, the epoch's order of the dataset indices (a permutation of 0..n-1);
  // empty: 0..n-1.
  std::vector<int64_t> order;
  bool drop_last = false;  // drop the remainder instead of padding the last batch
};

class DistributedSampler {
 public:
  // Throws std::invalid_argument with the fix for a batch not divisible by the world size,
  // a rank out of range, or an empty dataset; std::logic_error for an order that is not a
  // permutation of the dataset or is given with shuffling.
  explicit DistributedSampler(const SamplerOptions& options);

  int64_t steps_per_epoch() const { return steps_; }
  int global_batch() const { return options_.global_batch; }
  int per_rank_batch() const { return options_.global_batch / options_.world_size; }
  int64_t dataset_size() const { return options_.dataset_size; }
  // The epoch's global sequence of dataset indices (steps_per_epoch() * global_batch long).
  std::vector<int64_t> epoch_sequence(int64_t epoch) const;
  // This rank's steps for `epoch`, every batch `imgsz` x `imgsz`.
  std::vector<Step> plan_epoch(int64_t epoch, int imgsz) const;

 private:
  SamplerOptions options_;
  int64_t steps_ = 0;
};

// Throws std::invalid_argument naming the two nearest valid batches when the global `batch`
// does not split evenly over `world_size` ranks (checked before any worker starts).
void require_divisible_batch(int batch, int world_size);

// The RNG stream index of the shuffle (sample positions never reach it).
inline constexpr uint64_t kShuffleStream = ~0ull;

}  // namespace bareyolo::data
