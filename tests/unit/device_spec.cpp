// tests/unit/device_spec.cpp — --device parsing: every accepted form gives the ranks and
// GPUs it promises, every refused form names the string and what is accepted, the backend
// follows the devices, and spawning is wanted only without a launcher.
#include <doctest/doctest.h>

#include <stdexcept>

#include "engine/distributed/launch/device_spec.h"

namespace bareyolo::dist {
namespace {

std::vector<int> indices_of(std::string_view text, int gpu_count = 4) {
  DeviceSpec spec = DeviceSpec::parse(text, gpu_count);
  CHECK(spec.kind == DeviceKind::cuda);
  CHECK(spec.ranks == static_cast<int>(spec.cuda_indices.size()));
  return spec.cuda_indices;
}

TEST_CASE("dist device: CUDA index lists with and without the cuda prefix") {
  CHECK(indices_of("0") == std::vector<int>{0});
  CHECK(indices_of("0,1,3") == std::vector<int>{0, 1, 3});
  CHECK(indices_of("cuda:2") == std::vector<int>{2});
  CHECK(indices_of("cuda:0,1") == std::vector<int>{0, 1});
  CHECK(indices_of("cuda:0,cuda:1") == std::vector<int>{0, 1});
  CHECK(indices_of(" 1 , 0 ") == std::vector<int>{1, 0});
  CHECK(indices_of("CUDA") == std::vector<int>{0});
  CHECK(DeviceSpec::parse("cuda:0,1", 2).describe() == "cuda:0,1");
}

TEST_CASE("dist device: a repeated GPU gives two ranks on the TCP backend") {
  DeviceSpec spec = DeviceSpec::parse("0,0", 1);
  CHECK(spec.ranks == 2);
  CHECK(spec.repeats_a_gpu());
  CHECK(spec.default_backend() == Backend::tcp);
  DeviceSpec distinct = DeviceSpec::parse("0,1", 2);
  CHECK_FALSE(distinct.repeats_a_gpu());
#ifdef BAREYOLO_WITH_CUDA
  CHECK(distinct.default_backend() == Backend::nccl);
#else
  CHECK(distinct.default_backend() == Backend::tcp);
#endif
}

TEST_CASE("dist device: cpu ranks and auto") {
  DeviceSpec cpu = DeviceSpec::parse("cpu", 0);
  CHECK(cpu.kind == DeviceKind::cpu);
  CHECK(cpu.ranks == 1);
  CHECK(cpu.cuda_indices.empty());
  DeviceSpec four = DeviceSpec::parse("CPU", 2, 4);
  CHECK(four.ranks == 4);
  CHECK(four.describe() == "cpu x4");
  CHECK(four.default_backend() == Backend::tcp);
  CHECK(DeviceSpec::parse("auto", 0, 3).describe() == "cpu x3");
  CHECK(indices_of("auto", 3) == std::vector<int>{0, 1, 2});
}

TEST_CASE("dist device: refused strings name the string and what is accepted") {
  CHECK_THROWS_WITH_AS(
      DeviceSpec::parse("mps", 1),
      doctest::Contains("Apple's MPS is not supported: use --device cpu or a CUDA index"),
      std::runtime_error);
  for (const char* text : {"0,,1", "cuda:x", "-1", "gpu", "1,", "+1", "0;1"}) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(DeviceSpec::parse(text, 4),
                         doctest::Contains(("--device '" + std::string(text) + "'").c_str()),
                         std::runtime_error);
    CHECK_THROWS_WITH_AS(DeviceSpec::parse(text, 4), doctest::Contains("use 'cpu', 'auto'"),
                         std::runtime_error);
  }
  CHECK_THROWS_WITH_AS(DeviceSpec::parse("", 1), doctest::Contains("is empty"), std::runtime_error);
}

TEST_CASE("dist device: indices beyond the GPUs present and rank counts that disagree") {
  CHECK_THROWS_WITH_AS(DeviceSpec::parse("0,2", 2),
                       doctest::Contains("CUDA device 2 but the GPUs present are 0..1"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(DeviceSpec::parse("0", 0), doctest::Contains("there is no usable GPU"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(DeviceSpec::parse("0,1", 2, 3),
                       doctest::Contains("2 CUDA rank(s) but --nproc-per-node is 3"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(DeviceSpec::parse("cpu", 0, 0), doctest::Contains("--nproc-per-node 0"),
                       std::runtime_error);
  CHECK(DeviceSpec::parse("0,1", 2, 2).ranks == 2);
}

TEST_CASE("dist device: the C++ API's index list and single index") {
  DeviceSpec list = DeviceSpec::from_indices({1, 0}, 2);
  CHECK(list.kind == DeviceKind::cuda);
  CHECK(list.cuda_indices == std::vector<int>{1, 0});
  CHECK(list.ranks == 2);
  CHECK(DeviceSpec::from_index(1, 2).cuda_indices == std::vector<int>{1});
  CHECK_THROWS_WITH_AS(DeviceSpec::from_indices({}, 2), doctest::Contains("empty list"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(DeviceSpec::from_index(-1, 2), doctest::Contains("CUDA device -1"),
                       std::runtime_error);
  CHECK(DeviceSpec::cpu(2).ranks == 2);
}

TEST_CASE("dist device: spawning is wanted for several ranks without a launcher") {
  LaunchEnv none;
  LaunchEnv torchrun =
      read_launch_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29500"}});
  CHECK(DeviceSpec::parse("0,1", 2).wants_spawn(none));
  CHECK(DeviceSpec::parse("cpu", 0, 2).wants_spawn(none));
  CHECK_FALSE(DeviceSpec::parse("0", 2).wants_spawn(none));
  CHECK_FALSE(DeviceSpec::parse("0,1", 2).wants_spawn(torchrun));
}

}  // namespace
}  // namespace bareyolo::dist
