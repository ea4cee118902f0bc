// tests/unit/settings_yaml.cpp — a run directory's hyp.yaml and opt.yaml
// (models/train/outputs/settings_yaml.h): hyp.yaml reads back through --hyp to exactly the
// run's hyperparameters, and opt.yaml is a --config file that `bareyolo train` accepts key by
// key.
#include "models/train/outputs/settings_yaml.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tests/support/data_fixtures.h"
#include "tests/support/testing.h"
#include "tools/bareyolo/train_command.h"

using namespace bareyolo;

TEST_CASE("hyp.yaml lists every hyperparameter and reads back through --hyp exactly") {
  models::TrainOptions run;
  run.schedule.lr0 = 0.00334;
  run.loss.label_smoothing = 0.1;
  run.augment.mosaic = 0.5;
  run.weight_decay = 1.0 / 3;  // no short decimal: the text must still be exact
  const std::string text = models::hyp_yaml_text(run);
  CHECK(text.find("lr0: 0.00334\n") != std::string::npos);
  models::TrainOptions back;
  models::parse_hyp_yaml(text, "hyp.yaml", back);
  const auto expected = models::hyp_values(run), got = models::hyp_values(back);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(got[i].name);
    CHECK(got[i].value == expected[i].value);
  }
}

TEST_CASE("opt.yaml is a --config file that bareyolo train takes") {
  testing::TempDir dir;
  models::TrainOptions run;
  run.run_dir = (dir.path() / "runs" / "exp").string();
  run.data = (dir.path() / "data.yaml").string();
  run.optimizer = models::OptimizerKind::adamw;
  run.validate = false;
  run.sync_bn = false;
  run.freeze = 3;
  run.rect = true;
  run.schedule.cosine = true;
  run.autoanchor = false;
  run.single_cls = true;
  run.nbs = 32;
  run.bucket_mb = 7;
  std::filesystem::create_directories(run.run_dir);
  models::write_settings_yamls(run, run.run_dir);
  std::ostringstream opt;
  opt << std::ifstream(std::filesystem::path(run.run_dir) / "opt.yaml").rdbuf();
  const std::string project = "project: " + (dir.path() / "runs").string() + "\n";
  const std::vector<std::string> lines = {"optimizer: AdamW\n",
                                          "noval: true\n",
                                          "no_sync_bn: true\n",
                                          "freeze: 3\n",
                                          "name: exp\n",
                                          "rect: true\n",
                                          "multi_scale: false\n",
                                          "cos_lr: true\n",
                                          "noautoanchor: true\n",
                                          "single_cls: true\n",
                                          "nbs: 32\n",
                                          "bucket_mb: 7\n",
                                          project};
  for (const std::string& line : lines) {
    CAPTURE(line);
    CHECK(opt.str().find(line) != std::string::npos);
  }
  CHECK(opt.str().find("hyp: " + (dir.path() / "runs" / "exp" / "hyp.yaml").string()) !=
        std::string::npos);

  CLI::App app("bareyolo");
  add_train_command(app);
  std::vector<std::string> args = {"train", "--config",
                                   (std::filesystem::path(run.run_dir) / "opt.yaml").string()};
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector last argument first
  REQUIRE_NOTHROW(app.parse(args));
  // --config's keys are applied when the command runs (train_command.cpp), after the parse:
  // each must name a flag, which the command line then validates.
  CLI::App* train = app.get_subcommand("train");
  const YAML::Node keys =
      YAML::LoadFile((std::filesystem::path(run.run_dir) / "opt.yaml").string());
  CHECK(keys.size() >= 20);
  for (const auto& entry : keys) {
    std::string flag = "--" + entry.first.as<std::string>();
    std::replace(flag.begin(), flag.end(), '_', '-');
    CAPTURE(flag);
    CHECK(train->get_option_no_throw(flag) != nullptr);
  }
}
