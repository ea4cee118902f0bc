// models/loss/head_loss.cu — cuda::yolo_loss (models/loss/loss.h): YOLOv5's loss of head outputs
// on a GPU, where models::yolo_loss routes a call whose views are on a device.
//
// The matched rows are already on the device, packed by cell (models/loss/loss_rows.h): the rows
// of one cell form a *group*, in their original order. Nothing of a call depends on how many
// rows a batch has: the launches are sized by the rows' buffer's capacity, and each thread reads
// the count where the rows are, so a CUDA graph of one step's loss serves every batch that fits.
// Per-element math is models/loss/loss_terms.h, in double, as the host loss evaluates it.
// Kernels, all on the device's compute stream:
//   0. factors  one thread per level: its factors (level_factors) from the counts, which are in
//             device memory (summed over the ranks there under data parallelism)
//   1. box    one thread per group: CIoU of each of its rows (row order), the per-row box
//             terms, the box gradient (added in float in row order, as the host adds it) and
//             the objectness target of the cell = max(CIoU of the group's LAST row, 0) —
//             YOLOv5's "a later row overwrites", deterministically.
//   2. cls    one thread per (group, class): BCE (focal with fl_gamma) against the one-hot
//             (smoothed) target of every row of the group, its sum and the gradient (nc > 1).
//   3. obj    per level, every cell: BCE (focal with fl_gamma) of the objectness logit against
//             the target from 1,
//             gradient added, values summed per block by a fixed tree.
//   4. sum    one block: the per-row box terms, the per-(group, class) class terms and the
//             obj block sums, each in a fixed order, to three doubles, and from them the
//             values (write_loss_items) into the loss tensor, which stays on the device.
// No atomics: every gradient element has one writer and every sum a fixed order, so the
// result is the same bits on every run. Like the host loss, the gradient is ADDED into what
// `gradients` holds (head_loss passes zeros), in the host's order per element. The host's sums run
// in row/cell order and these in a tree: the values agree to double rounding, not bit for bit. The
// per-level arguments and the per-thread bodies are plain C++ in head_loss.cuh
// (tests/unit/cuda_loss_logic.cpp runs them without a GPU).
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/runtime/allocator.h"
#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/cuda/runtime/stream.h"
#include "kernels/scratch_stack.h"
#include "models/loss/head_loss.cuh"

namespace bareyolo::models {

namespace {

using namespace loss_cuda;

constexpr int kRowThreads = 128;
constexpr int kThreads = cuda::kReduceThreads;
constexpr int64_t kMaxObjBlocks = 1024;  // per level; fixed by the shape, not by the GPU

__global__ void factors_kernel(Levels levels, int level_count, const double* counts,
                               LevelFactors* factors) {
  if (int(threadIdx.x) < level_count)
    level_factors_of(levels, level_count, counts, int(threadIdx.x), factors);
}

// A thread past the batch's groups (the launch covers the buffer's capacity) does nothing.
__global__ void box_kernel(Levels levels, const std::byte* packed, double* tobj,
                           double* row_terms) {
  const int64_t group = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const Rows rows = rows_in(packed);
  if (group < rows.groups) box_group(levels, rows, group, tobj, row_terms);
}

__global__ void cls_kernel(Levels levels, const std::byte* packed, ClassTargets targets,
                           double* cls_terms) {
  const int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const Rows rows = rows_in(packed);
  if (index < rows.groups * targets.classes) cls_element(levels, rows, targets, index, cls_terms);
}

__global__ void obj_kernel(LevelArgs l, BceOptions obj_bce, const double* tobj,
                           double* block_sums) {
  const int64_t cells = l.cells.count();
  double sum = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < cells;
       i += int64_t(gridDim.x) * blockDim.x)
    sum += obj_cell(l, obj_bce, tobj, i);
  sum = cuda::block_reduce(sum, cuda::Plus{});
  if (threadIdx.x == 0) block_sums[blockIdx.x] = sum;
}

// The terms to sum for k = box, obj, cls: the rows', the obj blocks' and the (group, class)
// terms'. How many of the first and last there are is the batch's, read where the rows are.
struct Sums {
  const double* terms[3];
  int64_t obj_blocks;
  int classes;  // 0: no class terms (one class)
};

// The loss items from the sums, the gains and the images (counts[level_count]).
__global__ void sum_kernel(Sums sums, const std::byte* packed, LossHyp hyp, const double* counts,
                           int level_count, double* items) {
  const Rows rows = rows_in(packed);
  const int64_t count[3] = {rows.count, sums.obj_blocks, rows.groups * sums.classes};
  double total[3];
  for (int k = 0; k < 3; ++k) {
    double sum = 0;
    for (int64_t i = threadIdx.x; i < count[k]; i += blockDim.x) sum += sums.terms[k][i];
    total[k] = cuda::block_reduce(sum, cuda::Plus{});  // complete in thread 0
  }
  if (threadIdx.x == 0)
    write_loss_items(hyp, counts[level_count], total[0], total[1], total[2], items);
}

}  // namespace

}  // namespace bareyolo::models

namespace bareyolo::cuda {

void yolo_loss(const std::vector<View<const float>>& predictions, const models::LossRows& rows,
               const models::LossNormalization& norm, const models::LossOptions& options,
               const std::vector<View<float>>& gradients, const View<double>& values,
               const models::DetachedTerms* detached) {
  using namespace models;
  using namespace models::loss_cuda;
  const size_t level_count = predictions.size();
  const int nc = options.classes;
  if (norm.levels() != int64_t(level_count) || options.balance.size() < level_count ||
      gradients.size() != level_count)
    throw std::invalid_argument("cuda::yolo_loss: " + std::to_string(level_count) +
                                " prediction levels but counts, balance or gradients "
                                "for a different number (the GPU loss always computes gradients)");
  if (level_count == 0 || level_count > size_t(kMaxLevels))
    throw std::invalid_argument("cuda::yolo_loss: " + std::to_string(level_count) +
                                " levels; 1 to " + std::to_string(kMaxLevels) + " are supported");
  if (detached)
    throw std::invalid_argument(
        "cuda::yolo_loss: detached terms are for the host's finite-difference checks; pass "
        "none on " +
        predictions[0].device.str());
  const Device device = predictions[0].device;
  if (!(norm.counts.device() == device) || !(rows.device() == device) || !(values.device == device))
    throw std::invalid_argument("cuda::yolo_loss: the counts are on " + norm.counts.device().str() +
                                ", the rows on " + rows.device().str() + ", the values on " +
                                values.device.str() + ", the head on " + device.str() +
                                "; make them on the head's device");
  const int index = device.index;
  // Scratch, part 1: the levels' factors (level_factors_of writes them). Both parts are the
  // thread's grow-only scratch (kernels/scratch_stack.h): a warm step allocates none.
  bareyolo::detail::ScratchFrame scratch;
  LevelFactors* factors =
      static_cast<LevelFactors*>(scratch.take(int64_t(sizeof(LevelFactors) * level_count), device));

  std::vector<LevelArgs> levels;
  int64_t cells = 0, obj_blocks = 0;
  std::vector<int64_t> first_obj_block;
  for (size_t level = 0; level < level_count; ++level) {
    const View<const float>& p = predictions[level];
    const View<float>& g = gradients[level];
    if (!p.device.is_cuda() || !(p.device == device) || !(g.device == device))
      throw std::invalid_argument("cuda::yolo_loss: level " + std::to_string(level) + " is on " +
                                  p.device.str() + " with its gradient on " + g.device.str() +
                                  "; every level must be on " + device.str());
    levels.push_back(level_args(p, g, int(level), rows.cells()[level], norm.gradient_scale, options,
                                cells, factors + level));
    const int64_t level_cells = levels.back().cells.count();
    cells += level_cells;
    first_obj_block.push_back(obj_blocks);
    obj_blocks += std::clamp<int64_t>((level_cells + kThreads - 1) / kThreads, 1, kMaxObjBlocks);
  }
  Levels level_table;
  std::copy(levels.begin(), levels.end(), level_table.at);

  // Sized by the rows' capacity, not by this batch's rows (see the file comment).
  const int64_t capacity = rows.capacity();
  const bool with_classes = nc > 1;
  const int64_t cls_capacity = with_classes ? capacity * nc : 0;
  // Scratch, part 2: objectness targets, per-row box terms, per-(group, class) class terms, obj
  // block sums.
  double* tobj = static_cast<double*>(scratch.take(
      int64_t(sizeof(double)) * (cells + capacity + cls_capacity + obj_blocks), device));
  double* row_terms = tobj + cells;
  double* class_terms = row_terms + capacity;
  double* obj_sums = class_terms + cls_capacity;

  const cudaStream_t stream = cuda::stream_of(index);
  const double* counts = norm.counts.view<double>().data;
  factors_kernel<<<1, kMaxLevels, 0, stream>>>(level_table, int(level_count), counts, factors);
  BAREYOLO_CUDA_CHECK_LAUNCH();
  cuda::fill_bytes(tobj, 0, sizeof(double) * size_t(cells), index);  // 0.0: unmatched cells
  box_kernel<<<unsigned((capacity + kRowThreads - 1) / kRowThreads), kRowThreads, 0, stream>>>(
      level_table, rows.packed(), tobj, row_terms);
  BAREYOLO_CUDA_CHECK_LAUNCH();
  if (with_classes) {
    const double positive = 1 - 0.5 * options.hyp.label_smoothing;  // YOLOv5's cp and cn
    const double negative = 0.5 * options.hyp.label_smoothing;
    cls_kernel<<<unsigned((cls_capacity + kRowThreads - 1) / kRowThreads), kRowThreads, 0,
                 stream>>>(level_table, rows.packed(),
                           {nc, positive, negative, options.hyp.cls_bce()}, class_terms);
    BAREYOLO_CUDA_CHECK_LAUNCH();
  }
  for (size_t level = 0; level < level_count; ++level) {
    const int64_t next = level + 1 < level_count ? first_obj_block[level + 1] : obj_blocks;
    obj_kernel<<<unsigned(next - first_obj_block[level]), kThreads, 0, stream>>>(
        levels[level], options.hyp.obj_bce(), tobj, obj_sums + first_obj_block[level]);
    BAREYOLO_CUDA_CHECK_LAUNCH();
  }
  sum_kernel<<<1, kThreads, 0, stream>>>(
      Sums{{row_terms, obj_sums, class_terms}, obj_blocks, with_classes ? nc : 0}, rows.packed(),
      options.hyp, counts, int(level_count), values.data);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

}  // namespace bareyolo::cuda
