// tests/unit/yolov5_flags.cpp — YOLOv5 v7.0's command lines as typed: every flag of train.py,
// val.py and detect.py (their argparse lists, in order), given to `bareyolo train`, `val` and
// `predict` with a typical value, either parses (YOLOv5's aliases land on bareyolo's own flag)
// or is refused naming itself; none is unknown, and none is accepted and dropped.
//
// To edit when a flag becomes supported: flip its row from refused to works.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/data_fixtures.h"
#include "tests/support/testing.h"
#include "tools/bareyolo/eval_commands.h"
#include "tools/bareyolo/train_command.h"

using namespace bareyolo;

namespace {

enum class Expect { works, refused };

struct Yolov5Flag {
  const char* flag;
  std::vector<std::string> values;  // "FILE": an existing file
  Expect expect;
  const char* same_as = nullptr;  // for an alias: bareyolo's flag it must be
};

const std::vector<Yolov5Flag> kTrainPy = {
    {"--weights", {""}, Expect::works},  // '' = from scratch
    {"--cfg", {"FILE"}, Expect::works},
    {"--data", {"FILE"}, Expect::works},
    {"--hyp", {"FILE"}, Expect::works},
    {"--epochs", {"3"}, Expect::works},
    {"--batch-size", {"8"}, Expect::works, "--batch"},
    {"--imgsz", {"320"}, Expect::works},
    {"--img", {"320"}, Expect::works, "--imgsz"},
    {"--img-size", {"320"}, Expect::works, "--imgsz"},
    {"--rect", {}, Expect::works},
    {"--resume", {}, Expect::works},
    {"--nosave", {}, Expect::works},
    {"--noval", {}, Expect::works, "--no-val"},
    {"--noautoanchor", {}, Expect::works},
    {"--noplots", {}, Expect::works},
    {"--evolve", {"300"}, Expect::refused},
    {"--bucket", {"gs://b"}, Expect::refused},
    {"--cache", {}, Expect::works},  // alone: ram
    {"--image-weights", {}, Expect::refused},
    {"--device", {"cpu"}, Expect::works},
    {"--multi-scale", {}, Expect::works},
    {"--single-cls", {}, Expect::works},
    {"--optimizer", {"Adam"}, Expect::works},
    {"--sync-bn", {}, Expect::works},
    {"--workers", {"2"}, Expect::works},
    {"--project", {"runs/x"}, Expect::works},
    {"--name", {"exp"}, Expect::works},
    {"--exist-ok", {}, Expect::works},
    {"--quad", {}, Expect::refused},
    {"--cos-lr", {}, Expect::works},
    {"--label-smoothing", {"0.1"}, Expect::works},
    {"--patience", {"30"}, Expect::works},
    {"--freeze", {"0", "1", "2"}, Expect::works},
    {"--save-period", {"5"}, Expect::works},
    {"--seed", {"1"}, Expect::works},
    {"--local_rank", {"0"}, Expect::refused},
    {"--entity", {"me"}, Expect::refused},
    {"--upload_dataset", {}, Expect::refused},
    {"--bbox_interval", {"1"}, Expect::refused},
    {"--artifact_alias", {"latest"}, Expect::refused},
};

const std::vector<Yolov5Flag> kValPy = {
    {"--data", {"FILE"}, Expect::works},
    {"--weights", {"FILE"}, Expect::works},
    {"--batch-size", {"32"}, Expect::works, "--batch"},
    {"--imgsz", {"640"}, Expect::works},
    {"--img", {"640"}, Expect::works, "--imgsz"},
    {"--img-size", {"640"}, Expect::works, "--imgsz"},
    {"--conf-thres", {"0.001"}, Expect::works, "--conf"},
    {"--iou-thres", {"0.6"}, Expect::works, "--iou"},
    {"--max-det", {"300"}, Expect::refused},
    {"--task", {"val"}, Expect::works},
    {"--device", {"cpu"}, Expect::works},
    {"--workers", {"8"}, Expect::works},
    {"--single-cls", {}, Expect::works},
    {"--augment", {}, Expect::refused},
    {"--verbose", {}, Expect::works},
    {"--save-txt", {}, Expect::refused},
    {"--save-hybrid", {}, Expect::refused},
    {"--save-conf", {}, Expect::refused},
    {"--save-json", {}, Expect::works},
    {"--project", {"runs/val"}, Expect::works},
    {"--name", {"exp"}, Expect::works},
    {"--exist-ok", {}, Expect::works},
    {"--half", {}, Expect::refused},
    {"--dnn", {}, Expect::refused},
};

const std::vector<Yolov5Flag> kDetectPy = {
    {"--weights", {"FILE"}, Expect::works},
    {"--source", {"FILE"}, Expect::works},
    {"--data", {"FILE"}, Expect::works, "--names"},
    {"--imgsz", {"640"}, Expect::works},
    {"--img", {"640"}, Expect::works, "--imgsz"},
    {"--img-size", {"640"}, Expect::works, "--imgsz"},
    {"--conf-thres", {"0.25"}, Expect::works, "--conf"},
    {"--iou-thres", {"0.45"}, Expect::works, "--iou"},
    {"--max-det", {"1000"}, Expect::works},
    {"--device", {"cpu"}, Expect::works},
    {"--view-img", {}, Expect::refused},
    {"--save-txt", {}, Expect::works},
    {"--save-conf", {}, Expect::works},
    {"--save-crop", {}, Expect::works},
    {"--nosave", {}, Expect::works},
    {"--classes", {"0", "2"}, Expect::works},
    {"--agnostic-nms", {}, Expect::refused},
    {"--augment", {}, Expect::refused},
    {"--visualize", {}, Expect::refused},
    {"--update", {}, Expect::refused},
    {"--project", {"runs/detect"}, Expect::works},
    {"--name", {"exp"}, Expect::works},
    {"--exist-ok", {}, Expect::works},
    {"--line-thickness", {"3"}, Expect::works},
    {"--hide-labels", {}, Expect::works},
    {"--hide-conf", {}, Expect::works},
    {"--half", {}, Expect::refused},
    {"--dnn", {}, Expect::refused},
    {"--vid-stride", {"1"}, Expect::refused},
};

// `bareyolo <command> <required flags> <flag> <values>` parsed by the CLI's own commands; the
// required flags (those YOLOv5's script does not require, or bareyolo names otherwise) come
// first, except the one under test. Returns "" when the parse succeeds, else its error.
std::string parse(const std::string& command, const std::vector<std::string>& required,
                  const Yolov5Flag& flag, const std::string& file, CLI::App*& subcommand) {
  static CLI::App* app = nullptr;  // the commands bind their flags to static options
  delete app;
  app = new CLI::App("bareyolo");
  add_train_command(*app);
  add_eval_commands(*app);
  subcommand = app->get_subcommand(command);
  std::vector<std::string> args = {command};
  for (size_t i = 0; i < required.size(); i += 2)
    if (required[i] != flag.flag) args.insert(args.end(), {required[i], file});
  args.push_back(flag.flag);
  for (const std::string& value : flag.values) args.push_back(value == "FILE" ? file : value);
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector last argument first
  try {
    app->parse(args);
  } catch (const CLI::Error& e) {
    return e.what();
  }
  return "";
}

void walk(const std::string& command, const std::vector<std::string>& required,
          const std::vector<Yolov5Flag>& flags) {
  testing::TempDir dir;
  const std::string file = (dir.path() / "any.yaml").string();
  std::ofstream(file) << "lr0: 0.01\n";
  for (const Yolov5Flag& flag : flags) {
    CAPTURE(command);
    CAPTURE(flag.flag);
    CLI::App* subcommand = nullptr;
    const std::string error = parse(command, required, flag, file, subcommand);
    CAPTURE(error);
    if (flag.expect == Expect::works) {
      CHECK(error.empty());
      if (flag.same_as)
        CHECK(subcommand->get_option(flag.flag) == subcommand->get_option(flag.same_as));
    } else {
      CHECK(error.find(std::string(flag.flag) + " is refused: ") != std::string::npos);
    }
  }
}

}  // namespace

TEST_CASE("every flag of YOLOv5's train.py works in bareyolo train or is refused by name") {
  walk("train", {}, kTrainPy);
}

TEST_CASE("every flag of YOLOv5's val.py works in bareyolo val or is refused by name") {
  walk("val", {"--cfg", "FILE", "--weights", "FILE", "--data", "FILE"}, kValPy);
}

TEST_CASE("every flag of YOLOv5's detect.py works in bareyolo predict or is refused by name") {
  walk("predict", {"--cfg", "FILE", "--weights", "FILE", "--source", "FILE"}, kDetectPy);
}

TEST_CASE("a flag YOLOv5 does not have stays unknown to bareyolo train") {
  const Yolov5Flag bogus{"--no-such-yolov5-flag", {}, Expect::refused};
  CLI::App* subcommand = nullptr;
  const std::string error = parse("train", {}, bogus, "", subcommand);
  CHECK(error.find("--no-such-yolov5-flag") != std::string::npos);
  CHECK(error.find("is refused") == std::string::npos);
}
