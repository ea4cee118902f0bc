// models/head_loss.cu — yolo_loss_cuda (models/loss.h): YOLOv5's loss of head outputs on a GPU,
// for head_loss() (models/head_loss.h) when the head is on a device.
//
// The host matches the labels (build_targets) and uploads the matched rows once per call as
// a struct of arrays, sorted stably by (level, cell): the rows of one cell form a *group*,
// in their original order. Per-element math is models/loss_terms.h, in double, as the host
// loss evaluates it. Kernels, all on the device's compute stream:
//   1. box    one thread per group: CIoU of each of its rows (row order), the per-row box
//             terms, the box gradient (added in float in row order, as the host adds it) and
//             the objectness target of the cell = max(CIoU of the group's LAST row, 0) —
//             YOLOv5's "a later row overwrites", deterministically.
//   2. cls    one thread per (group, class): BCE against the one-hot (smoothed) target of
//             every row of the group, its sum and the gradient (nc > 1 only).
//   3. obj    per level, every cell: BCE of the objectness logit against the target of 1.,
//             gradient written, values summed per block by a fixed tree.
//   4. sum    one block: the per-row box terms, the per-(group, class) class terms and the
//             obj block sums, each in a fixed order, to three doubles the host reads.
// No atomics: every gradient element has one writer and every sum a fixed order, so the
// result is the same bits on every run. Gradients are zeroed first (one memset per level),
// so every element is written. The host's sums run in row/cell order and these in a tree:
// the values agree to double rounding, not bit for bit.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/allocator.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/runtime.h"
#include "models/loss.h"
#include "models/loss_terms.h"

namespace bareyolo::models {

namespace {

constexpr int kMaxLevels = 8;
constexpr int kRowThreads = 128;
constexpr int kThreads = cuda::kReduceThreads;
constexpr int64_t kMaxObjBlocks = 1024;  // per level; fixed by the shape, not by the GPU

struct LevelArgs {
  View<const float> head;
  View<float> grad;  // dense, the head's shape
  int anchors = 0, ny = 0, nx = 0, outputs = 0;
  int64_t first_cell = 0;  // of this level in the objectness-target buffer
  double rows = 0;         // n_i, the box mean's count
  double box_grad = 0;     // d total / d CIoU of one row
  double per_element = 0, cls_grad = 0;  // class terms: mean weight, d total / d BCE
  double per_cell = 0, obj_grad = 0;     // objectness terms likewise

  __device__ int64_t cell_index(int image, int anchor, int gj, int gi) const {
    return ((int64_t(image) * anchors + anchor) * ny + gj) * nx + gi;
  }
  __device__ const float* logit(int image, int anchor, int field, int gj, int gi) const {
    return head.channel(image, int64_t(anchor) * outputs + field) + int64_t(gj) * nx + gi;
  }
  __device__ float* gradient(int image, int anchor, int field, int gj, int gi) const {
    return grad.channel(image, int64_t(anchor) * outputs + field) + int64_t(gj) * nx + gi;
  }
};

struct Levels {
  LevelArgs at[kMaxLevels];
};

// The matched rows in device memory: row r of group g is in [first[g], first[g + 1]).
struct Rows {
  const double *tx, *ty, *tw, *th, *anchor_w, *anchor_h;
  const int *level, *image, *anchor, *gj, *gi, *cls;
  const int* first;
  int64_t count = 0, groups = 0;
};

// The host side of Rows: every array in one buffer, uploaded in one copy.
class PackedRows {
 public:
  // Rows of every level, stably sorted by (level, cell).
  PackedRows(const std::vector<std::vector<MatchedRow>>& targets,
             const std::vector<LevelArgs>& levels) {
    std::vector<std::pair<int, const MatchedRow*>> sorted;
    std::vector<int64_t> keys;
    for (size_t level = 0; level < targets.size(); ++level) {
      const LevelArgs& l = levels[level];
      std::vector<const MatchedRow*> rows;
      for (const MatchedRow& r : targets[level]) {
        if (r.image < 0 || r.image >= l.head.shape.n || r.anchor < 0 || r.anchor >= l.anchors ||
            r.gj < 0 || r.gj >= l.ny || r.gi < 0 || r.gi >= l.nx)
          throw std::invalid_argument(
              "yolo_loss_cuda: a matched row of level " + std::to_string(level) + " names cell (" +
              std::to_string(r.image) + ", " + std::to_string(r.anchor) + ", " +
              std::to_string(r.gj) + ", " + std::to_string(r.gi) +
              ") outside the head of shape " + l.head.shape.str());
        rows.push_back(&r);
      }
      auto cell = [&](const MatchedRow* r) {
        return ((int64_t(r->image) * l.anchors + r->anchor) * l.ny + r->gj) * l.nx + r->gi;
      };
      std::stable_sort(rows.begin(), rows.end(),
                       [&](const MatchedRow* a, const MatchedRow* b) { return cell(a) < cell(b); });
      for (const MatchedRow* r : rows) {
        if (sorted.empty() || sorted.back().first != int(level) || keys.back() != cell(r))
          group_first_.push_back(int(sorted.size()));
        sorted.emplace_back(int(level), r);
        keys.push_back(cell(r));
      }
    }
    count_ = int64_t(sorted.size());
    if (count_ > int64_t(std::numeric_limits<int>::max()))
      throw std::invalid_argument("yolo_loss_cuda: " + std::to_string(count_) +
                                  " matched rows; at most 2^31 - 1 per call (use a smaller batch)");
    groups_ = int64_t(group_first_.size());
    group_first_.push_back(int(count_));
    auto doubles = [&](auto field) {
      std::vector<double> v;
      for (const auto& [level, r] : sorted) v.push_back(field(*r));
      append(v);
    };
    auto ints = [&](auto field) {
      std::vector<int> v;
      for (const auto& [level, r] : sorted) v.push_back(field(level, *r));
      append(v);
    };
    doubles([](const MatchedRow& r) { return r.tx; });
    doubles([](const MatchedRow& r) { return r.ty; });
    doubles([](const MatchedRow& r) { return r.tw; });
    doubles([](const MatchedRow& r) { return r.th; });
    doubles([](const MatchedRow& r) { return r.anchor_w; });
    doubles([](const MatchedRow& r) { return r.anchor_h; });
    ints([](int level, const MatchedRow&) { return level; });
    ints([](int, const MatchedRow& r) { return r.image; });
    ints([](int, const MatchedRow& r) { return r.anchor; });
    ints([](int, const MatchedRow& r) { return r.gj; });
    ints([](int, const MatchedRow& r) { return r.gi; });
    ints([](int, const MatchedRow& r) { return r.cls; });
    append(group_first_);
  }

  int64_t count() const { return count_; }
  int64_t groups() const { return groups_; }

  // Uploads the arrays into `device` memory of `buffer` and returns their device pointers.
  Rows upload(cuda::DeviceBuffer& buffer, int device) const {
    buffer = cuda::DeviceBuffer(std::max<size_t>(bytes_.size(), 1), device);
    if (!bytes_.empty())
      cuda::copy(buffer.get(), bytes_.data(), bytes_.size(), cuda::CopyKind::host_to_device,
                 device);
    const auto* base = static_cast<const std::byte*>(buffer.get());
    auto at = [&](int array) { return base + offsets_[size_t(array)]; };
    Rows rows;
    rows.tx = reinterpret_cast<const double*>(at(0));
    rows.ty = reinterpret_cast<const double*>(at(1));
    rows.tw = reinterpret_cast<const double*>(at(2));
    rows.th = reinterpret_cast<const double*>(at(3));
    rows.anchor_w = reinterpret_cast<const double*>(at(4));
    rows.anchor_h = reinterpret_cast<const double*>(at(5));
    rows.level = reinterpret_cast<const int*>(at(6));
    rows.image = reinterpret_cast<const int*>(at(7));
    rows.anchor = reinterpret_cast<const int*>(at(8));
    rows.gj = reinterpret_cast<const int*>(at(9));
    rows.gi = reinterpret_cast<const int*>(at(10));
    rows.cls = reinterpret_cast<const int*>(at(11));
    rows.first = reinterpret_cast<const int*>(at(12));
    rows.count = count_;
    rows.groups = groups_;
    return rows;
  }

 private:
  // Appends an array at the next 8-byte boundary.
  template <class T>
  void append(const std::vector<T>& values) {
    const size_t offset = (bytes_.size() + 7) / 8 * 8;
    offsets_.push_back(offset);
    bytes_.resize(offset + values.size() * sizeof(T));
    if (!values.empty())
      std::memcpy(bytes_.data() + offset, values.data(), values.size() * sizeof(T));
  }

  std::vector<int> group_first_;
  int64_t count_ = 0, groups_ = 0;
  std::vector<std::byte> bytes_;
  std::vector<size_t> offsets_;
};

__global__ void box_kernel(Levels levels, Rows rows, double* tobj, double* row_terms) {
  const int64_t group = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (group >= rows.groups) return;
  const int first = rows.first[group], end = rows.first[group + 1];
  const LevelArgs& l = levels.at[rows.level[first]];
  const int image = rows.image[first], anchor = rows.anchor[first];
  const int gj = rows.gj[first], gi = rows.gi[first];
  double logit[4];
  for (int f = 0; f < 4; ++f) logit[f] = *l.logit(image, anchor, f, gj, gi);
  float gradient[4] = {0, 0, 0, 0};  // the memset's zeros, then the rows' terms in order
  double last_ciou = 0;
  for (int r = first; r < end; ++r) {
    const RowBox box = row_box(logit, {rows.tx[r], rows.ty[r], rows.tw[r], rows.th[r]},
                               rows.anchor_w[r], rows.anchor_h[r]);
    row_terms[r] = (1 - box.ciou) / l.rows;
    for (int f = 0; f < 4; ++f) gradient[f] += float(l.box_grad * box.dciou[f] * box.dcoord[f]);
    last_ciou = box.ciou;
  }
  for (int f = 0; f < 4; ++f) *l.gradient(image, anchor, f, gj, gi) = gradient[f];
  tobj[l.first_cell + l.cell_index(image, anchor, gj, gi)] = last_ciou < 0 ? 0.0 : last_ciou;
}

struct ClassTargets {
  int classes;
  double positive, negative, pos_weight;
};

__global__ void cls_kernel(Levels levels, Rows rows, ClassTargets targets, double* cls_terms) {
  const int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (index >= rows.groups * targets.classes) return;
  const int64_t group = index / targets.classes;
  const int c = int(index % targets.classes);
  const int first = rows.first[group], end = rows.first[group + 1];
  const LevelArgs& l = levels.at[rows.level[first]];
  const int image = rows.image[first], anchor = rows.anchor[first];
  const int gj = rows.gj[first], gi = rows.gi[first];
  const double logit = *l.logit(image, anchor, 5 + c, gj, gi);
  float gradient = 0;
  double sum = 0;
  for (int r = first; r < end; ++r) {
    const double t = c == rows.cls[r] ? targets.positive : targets.negative;
    sum += bce(logit, t, targets.pos_weight) * l.per_element;
    gradient += float(l.cls_grad * bce_grad(logit, t, targets.pos_weight));
  }
  *l.gradient(image, anchor, 5 + c, gj, gi) = gradient;
  cls_terms[index] = sum;
}

__global__ void obj_kernel(LevelArgs l, double pos_weight, const double* tobj,
                           double* block_sums) {
  const int64_t plane = int64_t(l.ny) * l.nx, cells = l.head.shape.n * l.anchors * plane;
  double sum = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < cells;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t in_plane = i % plane, image_anchor = i / plane;
    const int gj = int(in_plane / l.nx), gi = int(in_plane % l.nx);
    const int anchor = int(image_anchor % l.anchors), image = int(image_anchor / l.anchors);
    const double t = tobj[l.first_cell + i];
    const double logit = *l.logit(image, anchor, 4, gj, gi);
    sum += bce(logit, t, pos_weight) * l.per_cell;
    *l.gradient(image, anchor, 4, gj, gi) = float(l.obj_grad * bce_grad(logit, t, pos_weight));
  }
  sum = cuda::block_reduce(sum, cuda::Plus{});
  if (threadIdx.x == 0) block_sums[blockIdx.x] = sum;
}

// out[k] = the sum of terms[k][0 .. count[k]), in a fixed order.
struct Sums {
  const double* terms[3];
  int64_t count[3];
};

__global__ void sum_kernel(Sums sums, double* out) {
  for (int k = 0; k < 3; ++k) {
    double sum = 0;
    for (int64_t i = threadIdx.x; i < sums.count[k]; i += blockDim.x) sum += sums.terms[k][i];
    sum = cuda::block_reduce(sum, cuda::Plus{});
    if (threadIdx.x == 0) out[k] = sum;
  }
}

void check_launch() { BAREYOLO_CUDA_CHECK(cudaGetLastError()); }

}  // namespace

LossValues yolo_loss_cuda(const std::vector<View<const float>>& predictions,
                          const std::vector<std::vector<MatchedRow>>& targets,
                          const LossNormalization& norm, const LossOptions& options,
                          const std::vector<View<float>>& gradients) {
  const size_t level_count = predictions.size();
  const int nc = options.classes, outputs = nc + 5;
  if (targets.size() != level_count || norm.matched_rows.size() != level_count ||
      options.balance.size() < level_count || gradients.size() != level_count)
    throw std::invalid_argument("yolo_loss_cuda: " + std::to_string(level_count) +
                                " prediction levels but targets, counts, balance or gradients "
                                "for a different number");
  if (level_count == 0 || level_count > size_t(kMaxLevels))
    throw std::invalid_argument("yolo_loss_cuda: " + std::to_string(level_count) +
                                " levels; 1 to " + std::to_string(kMaxLevels) + " are supported");
  const Device device = predictions[0].device;
  const double scale_total = norm.images;
  const double grad_scale = scale_total * norm.gradient_scale;

  // Per level: views, shapes and the coefficients, computed as the host loss computes them.
  std::vector<LevelArgs> levels;
  int64_t cells = 0, obj_blocks = 0;
  std::vector<int64_t> first_obj_block;
  for (size_t level = 0; level < level_count; ++level) {
    const View<const float>& p = predictions[level];
    const View<float>& g = gradients[level];
    if (!p.device.is_cuda() || !(p.device == device) || !(g.device == device))
      throw std::invalid_argument("yolo_loss_cuda: level " + std::to_string(level) +
                                  " is on " + p.device.str() + " with its gradient on " +
                                  g.device.str() + "; every level must be on " + device.str());
    if (p.shape.c % outputs != 0)
      throw std::invalid_argument("yolo_loss_cuda: level " + std::to_string(level) + " has " +
                                  std::to_string(p.shape.c) + " channels, not a multiple of " +
                                  std::to_string(outputs) + " = nc + 5");
    if (!(g.shape == p.shape) || !g.dense())
      throw std::invalid_argument("yolo_loss_cuda: the gradient of level " +
                                  std::to_string(level) + " must be a dense " + p.shape.str() +
                                  " view, got " + g.shape.str());
    LevelArgs l;
    l.head = p;
    l.grad = g;
    l.anchors = int(p.shape.c / outputs);
    l.ny = int(p.shape.h);
    l.nx = int(p.shape.w);
    l.outputs = outputs;
    l.first_cell = cells;
    l.rows = norm.matched_rows[level];
    l.box_grad = -options.hyp.box / l.rows * grad_scale;
    l.per_element = 1.0 / (l.rows * nc);
    l.cls_grad = options.hyp.cls * l.per_element * grad_scale;
    l.per_cell = options.balance[level] / (norm.images * l.anchors * l.ny * l.nx);
    l.obj_grad = options.hyp.obj * l.per_cell * grad_scale;
    levels.push_back(l);
    const int64_t level_cells = p.shape.n * l.anchors * l.ny * l.nx;
    cells += level_cells;
    first_obj_block.push_back(obj_blocks);
    obj_blocks += std::clamp<int64_t>((level_cells + kThreads - 1) / kThreads, 1, kMaxObjBlocks);
  }
  Levels level_table;
  std::copy(levels.begin(), levels.end(), level_table.at);

  const PackedRows packed(targets, levels);
  const bool with_classes = nc > 1;
  const int64_t cls_terms = with_classes ? packed.groups() * nc : 0;
  const int index = device.index;
  cuda::DeviceBuffer row_buffer;
  const Rows rows = packed.upload(row_buffer, index);
  // Scratch: objectness targets, per-row box terms, per-(group, class) class terms, obj block
  // sums, the three results.
  cuda::DeviceBuffer scratch(sizeof(double) * size_t(cells + packed.count() + cls_terms +
                                                     obj_blocks + 3),
                             index);
  double* tobj = scratch.as<double>();
  double* row_terms = tobj + cells;
  double* class_terms = row_terms + packed.count();
  double* obj_sums = class_terms + cls_terms;
  double* results = obj_sums + obj_blocks;

  auto stream = static_cast<cudaStream_t>(cuda::compute_stream(index));
  cuda::fill_bytes(tobj, 0, sizeof(double) * size_t(cells), index);  // 0.0: unmatched cells
  for (const View<float>& g : gradients)
    cuda::fill_bytes(g.data, 0, sizeof(float) * size_t(g.shape.numel()), index);
  if (packed.groups() > 0) {
    box_kernel<<<unsigned((packed.groups() + kRowThreads - 1) / kRowThreads), kRowThreads, 0,
                 stream>>>(level_table, rows, tobj, row_terms);
    check_launch();
  }
  if (cls_terms > 0) {
    const double positive = 1 - 0.5 * options.hyp.label_smoothing;  // YOLOv5's cp and cn
    const double negative = 0.5 * options.hyp.label_smoothing;
    cls_kernel<<<unsigned((cls_terms + kRowThreads - 1) / kRowThreads), kRowThreads, 0,
                 stream>>>(level_table, rows, {nc, positive, negative, options.hyp.cls_pw},
                           class_terms);
    check_launch();
  }
  for (size_t level = 0; level < level_count; ++level) {
    const int64_t next = level + 1 < level_count ? first_obj_block[level + 1] : obj_blocks;
    obj_kernel<<<unsigned(next - first_obj_block[level]), kThreads, 0, stream>>>(
        levels[level], options.hyp.obj_pw, tobj, obj_sums + first_obj_block[level]);
    check_launch();
  }
  sum_kernel<<<1, kThreads, 0, stream>>>(
      Sums{{row_terms, obj_sums, class_terms}, {packed.count(), obj_blocks, cls_terms}}, results);
  check_launch();
  double sums[3];
  cuda::copy(sums, results, sizeof(sums), cuda::CopyKind::device_to_host, index);

  LossValues values;
  values.box = sums[0] * options.hyp.box;
  values.obj = sums[1] * options.hyp.obj;
  values.cls = sums[2] * options.hyp.cls;
  values.total = (values.box + values.obj + values.cls) * scale_total;
  return values;
}

}  // namespace bareyolo::models
