// tests/dist/reducer.cpp — the gradient reducer over forked ranks: after finish() every rank
// holds the mean of all ranks' gradients, with a frozen parameter (left alone) and an unused
// one (its bucket completes without it); broadcast_state makes every rank start as rank 0.
//
// Every rank can compute every other rank's gradient itself (the inputs come from seeds), so
// the reference mean is computed locally, in double, by plain backward passes.
#include "engine/distributed/ddp/reducer.h"
#include "engine/parameter_arena.h"
#include "engine/shipped_files.h"
#include "models/yolo/yolo_model.h"
#include "tests/support/dist_testing.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::dist;
using namespace bareyolo::dist::testing;

namespace {

models::DetectionModel tiny_model(uint64_t seed, DType dtype = DType::f64) {
  return models::DetectionModel(models::load_model_config(shipped_file("models/yolov5-tiny.yaml")),
                                {.nc = 2, .seed = seed, .dtype = dtype});
}

// The head gradients of rank `rank`'s batch; the last level's are zero when `unused_level`
// (its Detect convolution then gets no gradient, and its node is never reported).
void backward_of_rank(models::DetectionModel& model, int rank, bool unused_level,
                      Reducer* reducer) {
  bareyolo::testing::Rng rng(100 + uint64_t(rank));
  const DType dtype = model.state().front().value->dtype();
  auto random_tensor = [&](Shape4 shape) {
    const std::vector<double> values =
        bareyolo::testing::random_vector<double>(rng, shape.numel(), -1, 1);
    return dtype == DType::f64
               ? Tensor::from_vector(values, shape)
               : Tensor::from_vector(std::vector<float>(values.begin(), values.end()), shape);
  };
  const Tensor images = random_tensor({2, 3, 64, 64});
  std::vector<Tensor> grads;
  for (const Tensor& head : model.forward(images, Mode::train))
    grads.push_back(random_tensor(head.shape()));
  const int last_level_node = model.graph().size() - 1;
  if (unused_level) grads.back().zero();
  model.backward(grads, [&](int node) {
    if (reducer && !(unused_level && node == last_level_node)) reducer->node_done(node);
  });
}

std::vector<std::vector<double>> gradients(models::DetectionModel& model) {
  std::vector<std::vector<double>> values;
  for (const StateEntry& e : model.state())
    if (e.trainable()) values.push_back(e.grad->to_doubles());
  return values;
}

void check_reducer(int world, bool frozen_and_unused) {
  check_ranks_ok(run_ranks(
      world,
      [&](ProcessGroup& group) {
        const std::string frozen = "model.0.conv.weight";
        // The reference: every rank's plain gradient, averaged here.
        std::vector<std::vector<double>> mean;
        for (int r = 0; r < world; ++r) {
          models::DetectionModel model = tiny_model(1);
          backward_of_rank(model, r, frozen_and_unused, nullptr);
          std::vector<std::vector<double>> g = gradients(model);
          if (mean.empty()) mean.assign(g.size(), {});
          for (size_t p = 0; p < g.size(); ++p) {
            mean[p].resize(g[p].size());
            for (size_t k = 0; k < g[p].size(); ++k) mean[p][k] += g[p][k] / world;
          }
        }
        models::DetectionModel model = tiny_model(1 + uint64_t(group.rank()));  // different init
        const std::vector<StateEntry> state = model.state();
        ParameterArena arena(state, {.frozen = [&](const StateEntry& e) {
                               return frozen_and_unused && e.name == frozen;
                             }});
        broadcast_state(*group.comm, arena, state);
        models::DetectionModel rank0_model = tiny_model(1);
        const std::vector<StateEntry> got_state = model.state(), want_state = rank0_model.state();
        for (size_t i = 0; i < got_state.size(); ++i)
          if (got_state[i].value->to_doubles() != want_state[i].value->to_doubles())
            throw std::runtime_error(got_state[i].name + " differs from rank 0's after broadcast");
        Reducer reducer(arena, model.graph(), *group.comm,
                        {.bucket_mb = 0.2, .first_bucket_mb = 0.05});
        backward_of_rank(model, group.rank(), frozen_and_unused, &reducer);
        reducer.finish();

        const std::vector<std::vector<double>> got = gradients(model);
        for (size_t p = 0; p < got.size(); ++p) {
          const bool is_frozen = frozen_and_unused && p == 0;
          models::DetectionModel local = tiny_model(1);
          std::vector<double> own;
          if (is_frozen) {  // not reduced: this rank's own gradient
            backward_of_rank(local, group.rank(), frozen_and_unused, nullptr);
            own = gradients(local)[0];
          }
          const std::vector<double>& want = is_frozen ? own : mean[p];
          for (size_t k = 0; k < got[p].size(); ++k)
            if (std::abs(got[p][k] - want[k]) > 1e-12 * (1 + std::abs(want[k])))
              throw std::runtime_error("gradient " + std::to_string(p) + "[" + std::to_string(k) +
                                       "] = " + std::to_string(got[p][k]) + ", want " +
                                       std::to_string(want[k]));
        }
      },
      std::chrono::seconds(90)));
}

// The tiny model's gradients on every rank of `group` (each computed here), and the ones this
// rank holds after they were reduced through bf16 buckets.
struct Bf16Reduction {
  std::vector<std::vector<std::vector<double>>> of_rank;  // [rank][parameter][element]
  std::vector<std::vector<double>> reduced;
};

Bf16Reduction reduce_in_bf16(ProcessGroup& group) {
  Bf16Reduction result;
  for (int r = 0; r < group.comm->world_size(); ++r) {
    models::DetectionModel model = tiny_model(1, DType::f32);
    backward_of_rank(model, r, false, nullptr);
    result.of_rank.push_back(gradients(model));
  }
  models::DetectionModel model = tiny_model(1, DType::f32);
  const std::vector<StateEntry> state = model.state();
  ParameterArena arena(state);
  Reducer reducer(arena, model.graph(), *group.comm,
                  {.bucket_mb = 0.2, .first_bucket_mb = 0.05, .bf16_buckets = true});
  backward_of_rank(model, group.rank(), false, &reducer);
  reducer.finish();
  result.reduced = gradients(model);
  return result;
}

std::string element_name(size_t p, size_t k) {
  return "gradient " + std::to_string(p) + "[" + std::to_string(k) + "]";
}

}  // namespace

// With bf16 buckets each rank sends its f32 gradient rounded to bf16; the 2-rank ring adds the
// two in float and rounds, and finish() halves the sum in f32 (exact): every rank can compute
// that result bit for bit.
TEST_CASE("reducer over 2 ranks with bf16 buckets: half the rounded sum of the rounded gradients") {
  check_ranks_ok(run_ranks(
      2,
      [&](ProcessGroup& group) {
        const Bf16Reduction r = reduce_in_bf16(group);
        int64_t changed_by_rounding = 0;
        for (size_t p = 0; p < r.reduced.size(); ++p)
          for (size_t k = 0; k < r.reduced[p].size(); ++k) {
            const float g0 = float(r.of_rank[0][p][k]), g1 = float(r.of_rank[1][p][k]);
            const double want = double(round_to_bf16(round_to_bf16(g0) + round_to_bf16(g1)) / 2);
            if (r.reduced[p][k] != want)
              throw std::runtime_error(element_name(p, k) + " = " +
                                       std::to_string(r.reduced[p][k]) + ", want " +
                                       std::to_string(want));
            changed_by_rounding += want != double((g0 + g1) / 2);
          }
        // The wire really was bf16: most means differ from the f32 ones.
        if (changed_by_rounding == 0) throw std::runtime_error("no gradient was rounded");
      },
      std::chrono::seconds(90)));
}

// At 3 ranks the mean is not a halving: it must be a bf16 sum divided by 3 in f32 (a bf16
// average would round it once more: NCCL's scales by 1/3 rounded to bf16, 0.2% too large),
// and within the bf16 sums' rounding of the f32 mean, with no bias.
TEST_CASE("reducer over 3 ranks with bf16 buckets: a bf16 sum divided by 3 in f32, unbiased") {
  check_ranks_ok(run_ranks(
      3,
      [&](ProcessGroup& group) {
        const Bf16Reduction r = reduce_in_bf16(group);
        int64_t checked = 0, not_bf16 = 0;
        double relative_error_sum = 0;
        for (size_t p = 0; p < r.reduced.size(); ++p)
          for (size_t k = 0; k < r.reduced[p].size(); ++k) {
            const float got = float(r.reduced[p][k]);
            const float sum = round_to_bf16(got * 3);  // the bf16 sum that crossed the wire
            if (got != sum / 3)
              throw std::runtime_error(element_name(p, k) + " = " + std::to_string(got) +
                                       " is no bf16 sum divided by 3 in f32");
            double f32_mean = 0, magnitude = 0;
            for (int rank = 0; rank < 3; ++rank) {
              f32_mean += r.of_rank[size_t(rank)][p][k] / 3;
              magnitude += std::abs(r.of_rank[size_t(rank)][p][k]) / 3;
            }
            // Three roundings to bf16 (each gradient, then two sums): 8-bit mantissas.
            if (std::abs(got - f32_mean) > 3 * magnitude / 256 + 1e-30)
              throw std::runtime_error(element_name(p, k) + " = " + std::to_string(got) +
                                       ", far from the f32 mean " + std::to_string(f32_mean));
            if (magnitude > 1e-6) {
              relative_error_sum += (got - f32_mean) * (f32_mean < 0 ? -1 : 1) / magnitude;
              ++checked;
            }
            not_bf16 += round_to_bf16(got) != got;
          }
        if (checked < 1000) throw std::runtime_error("too few gradients to judge a bias");
        // Rounding to nearest errs both ways; a mean scaled by 0.333984 instead of 1/3 would
        // be 0.2% too large, away from zero: a mean error of about 1e-3 of the magnitudes.
        const double bias = relative_error_sum / double(checked);
        if (std::abs(bias) > 2e-4)
          throw std::runtime_error("mean relative error " + std::to_string(bias) + " over " +
                                   std::to_string(checked) + " gradients: biased");
        // Rounded into bf16 once more, most means would be bf16 values.
        if (not_bf16 < checked / 2)
          throw std::runtime_error(std::to_string(not_bf16) + " of " + std::to_string(checked) +
                                   " means are not bf16 values: were they rounded again?");
      },
      std::chrono::seconds(90)));
}

TEST_CASE("reducer over 2 ranks: every gradient is the mean of the ranks' gradients") {
  check_reducer(2, false);
}

TEST_CASE("reducer over 3 ranks with a frozen and an unused parameter") { check_reducer(3, true); }
