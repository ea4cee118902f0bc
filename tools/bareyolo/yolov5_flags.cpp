// tools/bareyolo/yolov5_flags.cpp — see yolov5_flags.h.
#include "tools/bareyolo/yolov5_flags.h"

#include <string>

namespace bareyolo::cli {

namespace {

constexpr const char* kNoWandb =
    "Weights & Biases logging is not part of bareyolo (results.csv, "
    "results.jsonl and report.html are in the run directory)";
constexpr const char* kNoTta = "test-time augmentation is not implemented";
constexpr const char* kNoHalf = "there is no float16 inference; --amp trains in bf16";
constexpr const char* kNoDnn = "there is no OpenCV DNN backend (ONNX: bareyolo export)";

constexpr RefusedFlag kTrain[] = {
    {"--evolve", "hyperparameter evolution is not implemented"},
    {"--bucket", "there is no Google Cloud Storage upload"},
    {"--image-weights", "class-weighted image sampling is not implemented"},
    {"--quad", "the quad collate is not implemented"},
    {"--local_rank",
     "torch.distributed.launch's argument: start with torchrun (which sets LOCAL_RANK) or "
     "with bareyolo's own --device 0,1,..."},
    {"--entity", kNoWandb},
    {"--upload_dataset", kNoWandb},
    {"--bbox_interval", kNoWandb},
    {"--artifact_alias", kNoWandb},
};

constexpr RefusedFlag kVal[] = {
    {"--max-det", "not yet supported by bareyolo val"},
    {"--augment", kNoTta},
    {"--save-txt", "not yet supported by bareyolo val"},
    {"--save-hybrid", "not yet supported by bareyolo val"},
    {"--save-conf", "not yet supported by bareyolo val"},
    {"--half", kNoHalf},
    {"--dnn", kNoDnn},
};

constexpr RefusedFlag kPredict[] = {
    {"--view-img", "there is no display: the drawn images are written to the output folder"},
    {"--agnostic-nms", "class-agnostic NMS is not implemented"},
    {"--augment", kNoTta},
    {"--visualize", "feature-map visualisation is not implemented"},
    {"--update", "there are no .pt weights to strip"},
    {"--half", kNoHalf},
    {"--dnn", kNoDnn},
    {"--vid-stride", "videos and streams are not read, only images"},
};

}  // namespace

std::span<const RefusedFlag> yolov5_train_refusals() { return kTrain; }
std::span<const RefusedFlag> yolov5_val_refusals() { return kVal; }
std::span<const RefusedFlag> yolov5_predict_refusals() { return kPredict; }

void refuse_flags(CLI::App* command, std::span<const RefusedFlag> flags) {
  for (const RefusedFlag& flag : flags) {
    if (command->get_option_no_throw(flag.name) != nullptr) continue;
    const std::string name = flag.name, why = flag.why;
    command
        ->add_option(
            name,
            [name, why](const CLI::results_t&) -> bool {
              throw CLI::ValidationError(name, "YOLOv5's " + name + " is refused: " + why);
            },
            "")
        ->expected(0, -1)
        ->group("");  // hidden from --help
  }
}

}  // namespace bareyolo::cli
