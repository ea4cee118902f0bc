// tests/unit/model.cpp — DetectionModel from the model yamls: YOLOv5's parameter counts,
// state_dict names, shapes and order, strides and anchors, the from-scratch state, head
// output shapes, a gradient check of a whole (tiny) model, and errors in malformed yamls.
#include <immintrin.h>
#include <cmath>

#include <map>

#include "engine/shipped_files.h"
#include "models/yolo/yolo_model.h"
#include "tests/unit/module_check.h"

using namespace bareyolo;
using namespace bareyolo::models;
using namespace bareyolo::testing;

namespace {

std::string config_path(const std::string& name) { return shipped_file("models/" + name); }

DetectionModel load(const std::string& name, ModelOptions options = {}) {
  return DetectionModel(load_model_config(config_path(name)), options);
}

// The model as one Module whose output is its three head tensors, flattened and joined.
class ModelUnderTest : public Module {
 public:
  explicit ModelUnderTest(DetectionModel& model) : model_(model) {}
  Shape4 output_shape(std::span<const Shape4> inputs) const override {
    int64_t total = 0;
    for (int node : detect_nodes()) total += model_.graph().shapes(inputs[0])[size_t(node)].numel();
    return {1, 1, 1, total};
  }
  void forward(std::span<const Tensor> inputs, Tensor& output, Mode mode) override {
    std::vector<double> all;
    shapes_.clear();
    for (const Tensor& t : model_.forward(inputs[0], mode)) {
      std::vector<double> v = t.to_vector<double>();
      all.insert(all.end(), v.begin(), v.end());
      shapes_.push_back(t.shape());
    }
    output.copy_from(Tensor::from_vector(all, output.shape()));
  }
  void backward(std::span<const Tensor>, const Tensor&, const Tensor& grad_output,
                std::span<Tensor>, ops::GradientWrite) override {
    std::vector<double> g = grad_output.to_vector<double>();
    std::vector<Tensor> grads;
    size_t offset = 0;
    for (const Shape4& s : shapes_) {
      grads.push_back(Tensor::from_vector(
          std::vector<double>(g.begin() + long(offset), g.begin() + long(offset + s.numel())), s));
      offset += size_t(s.numel());
    }
    model_.backward(grads);
  }
  void collect_state(const std::string&, std::vector<StateEntry>& state) override {
    for (const StateEntry& e : model_.state()) state.push_back(e);
  }

 private:
  std::vector<int> detect_nodes() const {
    int n = model_.graph().size();
    return {n - 3, n - 2, n - 1};
  }
  DetectionModel& model_;
  std::vector<Shape4> shapes_;
};

}  // namespace

TEST_CASE("yolov5 n s m have YOLOv5's trainable parameter counts") {
  CHECK(load("yolov5n.yaml").parameter_count() == 1872157);
  CHECK(load("yolov5s.yaml").parameter_count() == 7235389);
  CHECK(load("yolov5m.yaml").parameter_count() == 21190557);
}

TEST_CASE("yolov5n state matches YOLOv5's state_dict names shapes and order") {
  DetectionModel model = load("yolov5n.yaml");
  std::vector<StateEntry> state = model.state();
  REQUIRE(state.size() == 349);
  std::map<std::string, std::vector<int64_t>> dims;
  for (const StateEntry& e : state) dims[e.name] = e.dims;
  CHECK(state[0].name == "model.0.conv.weight");
  CHECK(dims["model.0.conv.weight"] == std::vector<int64_t>{16, 3, 6, 6});
  CHECK(state[5].name == "model.0.bn.num_batches_tracked");
  CHECK(dims["model.0.bn.num_batches_tracked"].empty());
  CHECK(dims["model.2.m.0.cv2.conv.weight"] == std::vector<int64_t>{16, 16, 3, 3});
  CHECK(dims["model.9.cv2.conv.weight"] == std::vector<int64_t>{256, 512, 1, 1});
  CHECK(dims["model.13.cv1.conv.weight"] == std::vector<int64_t>{64, 256, 1, 1});
  CHECK(dims["model.23.m.0.cv2.conv.weight"] == std::vector<int64_t>{128, 128, 3, 3});
  CHECK(state[342].name == "model.24.anchors");
  CHECK(dims["model.24.anchors"] == std::vector<int64_t>{3, 3, 2});
  CHECK(state[343].name == "model.24.m.0.weight");
  CHECK(dims["model.24.m.0.weight"] == std::vector<int64_t>{255, 64, 1, 1});
  CHECK(dims["model.24.m.2.bias"] == std::vector<int64_t>{255});
  CHECK(state[348].name == "model.24.m.2.bias");
  CHECK(dims.count("model.11.weight") == 0);  // Upsample and Concat have no state
}

TEST_CASE("yolov5n strides anchors and from-scratch state are YOLOv5's") {
  DetectionModel model = load("yolov5n.yaml");
  CHECK(model.strides() == std::vector<double>{8, 16, 32});
  CHECK(model.anchor(0, 0) == std::array<double, 2>{1.25, 1.625});
  CHECK(model.anchor(1, 2) == std::array<double, 2>{3.6875, 7.4375});
  CHECK(model.anchor(2, 2) == std::array<double, 2>{11.65625, 10.1875});
  std::map<std::string, StateEntry> state;
  for (const StateEntry& e : model.state()) state[e.name] = e;
  CHECK(state.at("model.3.bn.running_var").value->to_vector<float>()[0] == 0.89990234375f);
  CHECK(state.at("model.3.bn.num_batches_tracked").value->to_vector<int64_t>()[0] == 1);
  // Detect bias priors on top of U(-1/8, 1/8) (fan_in 64 for level 0), rounded to fp16.
  std::vector<float> bias = state.at("model.24.m.0.bias").value->to_vector<float>();
  CHECK(std::fabs(bias[4] - std::log(8.0 / (80 * 80))) < 0.126);
  for (int anchor = 0; anchor < 3; ++anchor)
    for (int c = 0; c < 80; ++c) {  // every class of every anchor
      CAPTURE(anchor);
      CAPTURE(c);
      CHECK(std::fabs(bias[size_t(anchor * 85 + 5 + c)] - std::log(0.6 / (80 - 0.99999))) < 0.126);
    }
  for (float v : state.at("model.1.conv.weight").value->to_vector<float>())
    REQUIRE(v == _cvtsh_ss(_cvtss_sh(v, 0)));  // representable in fp16
}

TEST_CASE("nc override changes the Detect outputs and the head shapes follow the strides") {
  DetectionModel model = load("yolov5-tiny.yaml", {.nc = 3});
  CHECK(model.num_classes() == 3);
  Tensor images = Tensor::zeros({2, 3, 64, 96});
  const std::vector<Tensor>& out = model.forward(images, Mode::eval);
  REQUIRE(out.size() == 3);
  CHECK(out[0].shape() == Shape4{2, 3 * 8, 8, 12});
  CHECK(out[1].shape() == Shape4{2, 3 * 8, 4, 6});
  CHECK(out[2].shape() == Shape4{2, 3 * 8, 2, 3});
}

TEST_CASE("whole tiny model backward matches finite differences") {
  DetectionModel model = load("yolov5-tiny.yaml", {.nc = 2, .dtype = DType::f64});
  ModelUnderTest net(model);
  Rng rng(91);
  check_module_gradients(net, {{2, 3, 64, 64}}, Mode::train, rng, /*input_gradients=*/false,
                         /*max_checks_per_input=*/2);
}

TEST_CASE("malformed model yamls name the file row and problem") {
  const std::string head =
      "nc: 2\ndepth_multiple: 0.33\nwidth_multiple: 0.25\nanchors:\n  - [10,13, 16,30, 33,23]\n";
  auto build = [&](const std::string& rows) {
    DetectionModel(parse_model_config(head + rows, "bad.yaml"));
  };
  CHECK_THROWS_WITH_AS(build("backbone:\n  - [-1, 1, Conv, [64, 3, 2]]\n  - [-1, 1, Blob, [1]]\n"
                             "head:\n  - [[1], 1, Detect, [nc, anchors]]\n"),
                       doctest::Contains("bad.yaml, row 1 (line 8), Blob: unknown module"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(build("backbone:\n  - [-1, 1, Conv, [64, 3, 2]]\n  - [5, 1, Conv, [8]]\n"
                             "head:\n  - [[1], 1, Detect, [nc, anchors]]\n"),
                       doctest::Contains("row 1 (line 8), Conv: from index 5"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(build("backbone:\n  - [-1, 1, Conv]\nhead: []\n"),
                       doctest::Contains("row 0 (line 7): a row must be"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_model_config("nc: 2\n", "short.yaml"),
                       doctest::Contains("short.yaml: missing key 'depth_multiple'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_model_config("nc: [oops\n", "broken.yaml"),
                       doctest::Contains("broken.yaml: not valid yaml"), std::invalid_argument);
  // A layer's or the graph's refusal names the row too (before: "Conv2d: channels, kernel
  // and stride must be positive" and "graph node model.2.: cannot concatenate", no yaml row).
  CHECK_THROWS_WITH_AS(
      build("backbone:\n  - [-1, 1, Conv, [64, 0, 2]]\n"
            "head:\n  - [[0], 1, Detect, [nc, anchors]]\n"),
      doctest::Contains("bad.yaml, row 0 (line 7), Conv: the kernel size (argument 1) is 0"),
      std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      build("backbone:\n  - [-1, 1, Conv, [64, 3, 2]]\n  - [-1, 1, Conv, [64, 3, 2]]\n"
            "head:\n  - [[-1, 0], 1, Concat, [1]]\n  - [[2], 1, Detect, [nc, anchors]]\n"),
      doctest::Contains("bad.yaml, row 2 (line 10), Concat: graph node model.2.: "
                        "cannot concatenate"),
      std::invalid_argument);
}

TEST_CASE("a negative nc is refused, and image sizes round up to the stride with a note") {
  const ModelConfig config = load_model_config(shipped_file("models/yolov5-tiny.yaml"));
  CHECK_THROWS_WITH_AS(DetectionModel(config, {.nc = -3}),
                       doctest::Contains("nc -3 is not a number of classes; give one >= 1, or 0"),
                       std::invalid_argument);
  std::string note;
  CHECK(stride_multiple_size(640, 32, 0, &note) == 640);
  CHECK(note.empty());
  CHECK(stride_multiple_size(100, 32, 0, &note) == 128);
  CHECK(note == "--imgsz 100 is not a multiple of the model's stride 32: using 128");
  CHECK(stride_multiple_size(32, 32, 64, &note) == 64);
  CHECK(note == "--imgsz 32 is below the minimum of 64: using 64");  // 32 is a multiple of 32
  CHECK(stride_multiple_size(20, 32, 64, &note) == 64);
  CHECK(note ==
        "--imgsz 20 is not a multiple of the model's stride 32, and is below the minimum of 64: "
        "using 64");
}

TEST_CASE("training shares gradient buffers between layers") {
  DetectionModel model = load("yolov5n.yaml", {.nc = 3});
  Rng rng(93);
  const Tensor images =
      Tensor::from_vector(random_vector<float>(rng, 2 * 3 * 96 * 128, 0, 1), {2, 3, 96, 128});
  model.forward(images, Mode::train);
  const int64_t outputs = model.graph().planned_activation_elements();
  const int64_t gradients = model.graph().planned_gradient_elements();
  MESSAGE("yolov5n training plan: gradients " << gradients << " elements, outputs " << outputs);
  // One buffer per node would equal the outputs; measured 0.64 of them for yolov5n: the neck's
  // Concats keep their gradients live across most of backward.
  CHECK(gradients > 0);
  CHECK(gradients < outputs * 7 / 10);
  // Validation between epochs plans for evaluation, which needs no gradients: they are freed.
  model.forward(images, Mode::eval);
  CHECK(model.graph().planned_gradient_elements() == 0);
}

TEST_CASE("evaluation shares activation buffers and gives the same outputs") {
  DetectionModel model = load("yolov5n.yaml", {.nc = 3});
  Rng rng(92);
  const Tensor images =
      Tensor::from_vector(random_vector<float>(rng, 2 * 3 * 96 * 128, 0, 1), {2, 3, 96, 128});
  auto outputs = [&] {
    std::vector<std::vector<float>> values;
    for (const Tensor& t : model.forward(images, Mode::eval))
      values.push_back(t.to_vector<float>());
    return values;
  };
  model.graph().keep_all_outputs(true);
  const std::vector<std::vector<float>> reference = outputs();
  const int64_t kept = model.graph().planned_activation_elements();
  model.graph().keep_all_outputs(false);
  CHECK(outputs() == reference);
  const int64_t shared = model.graph().planned_activation_elements();
  // Measured 0.46 for yolov5n: the skip connections into the neck's Concats keep large
  // buffers alive across most of the network.
  CHECK(shared < kept * 6 / 10);
  std::vector<Tensor> grads;
  for (const Tensor& t : model.forward(images, Mode::eval))
    grads.push_back(Tensor::zeros(t.shape()));
  CHECK_THROWS_WITH_AS(model.backward(grads), doctest::Contains("after an evaluation forward"),
                       std::logic_error);
}
