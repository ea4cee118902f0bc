// tests/unit/env.cpp — rank discovery from injected environments: torchrun, bareyolo's
// own launcher, OpenMPI and SLURM (with its compressed node lists), the store port that
// avoids torchrun's own store, the refusal of nested spawns, and one error per malformed
// value, each naming the variable and its value.
#include <doctest/doctest.h>

#include <stdexcept>

#include "engine/distributed/launch/env.h"
#include "engine/distributed/launch/process_group.h"

namespace bareyolo::dist {
namespace {

const EnvMap kTorchrun = {{"RANK", "3"},
                          {"LOCAL_RANK", "1"},
                          {"WORLD_SIZE", "4"},
                          {"LOCAL_WORLD_SIZE", "2"},
                          {"MASTER_ADDR", "node01"},
                          {"MASTER_PORT", "29500"},
                          {"TORCHELASTIC_RUN_ID", "none"},
                          {"TORCHELASTIC_USE_AGENT_STORE", "True"}};

EnvMap with(EnvMap env, const std::string& name, const std::string& value) {
  env[name] = value;
  return env;
}

EnvMap without(EnvMap env, const std::string& name) {
  env.erase(name);
  return env;
}

TEST_CASE("dist env: no launcher variables is a single process") {
  LaunchEnv env = read_launch_env({{"HOME", "/root"}});
  CHECK_FALSE(env.launched());
  CHECK(env.rank == 0);
  CHECK(env.world_size == 1);
  CHECK(env.master_addr == "127.0.0.1");
  CHECK_THROWS_WITH_AS(env.store_port(), doctest::Contains("no MASTER_PORT"), std::runtime_error);
  CHECK(process_environment().size() > 0);
}

TEST_CASE("dist env: torchrun's variables and a store port beside torchrun's own store") {
  LaunchEnv env = read_launch_env(kTorchrun);
  CHECK(env.launcher == Launcher::torchrun);
  CHECK(env.rank == 3);
  CHECK(env.local_rank == 1);
  CHECK(env.world_size == 4);
  CHECK(env.local_world_size == 2);
  CHECK(env.master_addr == "node01");
  CHECK(env.master_port == 29500);
  CHECK(env.store_port() == 29501);
  CHECK(env.store_token == "torchrun:none");
  CHECK(read_launch_env(without(kTorchrun, "TORCHELASTIC_RUN_ID")).store_port() == 29501);
  EnvMap manual =
      without(without(kTorchrun, "TORCHELASTIC_RUN_ID"), "TORCHELASTIC_USE_AGENT_STORE");
  CHECK(read_launch_env(manual).launcher == Launcher::manual);
  CHECK(read_launch_env(manual).store_port() == 29500);
  CHECK_THROWS_WITH_AS(read_launch_env(with(kTorchrun, "MASTER_PORT", "65535")).store_port(),
                       doctest::Contains("MASTER_PORT=65535"), std::runtime_error);
}

TEST_CASE("dist env: local values default to one node") {
  LaunchEnv env = read_launch_env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1234"}});
  CHECK(env.local_rank == 1);
  CHECK(env.local_world_size == 2);
  CHECK(env.master_addr == "127.0.0.1");
}

TEST_CASE("dist env: malformed values name the variable and the value") {
  auto error_of = [](const EnvMap& env, const char* expected) {
    CAPTURE(expected);
    CHECK_THROWS_WITH_AS(read_launch_env(env), doctest::Contains(expected), std::runtime_error);
  };
  error_of(with(kTorchrun, "RANK", "abc"), "RANK='abc' is not an integer");
  error_of(with(kTorchrun, "RANK", "4"), "RANK=4 must be smaller than WORLD_SIZE=4");
  error_of(with(kTorchrun, "RANK", "-1"), "RANK='-1'");
  error_of(without(kTorchrun, "WORLD_SIZE"), "RANK=3 is set but WORLD_SIZE is not");
  error_of(with(kTorchrun, "WORLD_SIZE", "0"), "WORLD_SIZE='0'");
  error_of(with(kTorchrun, "LOCAL_RANK", "2"), "LOCAL_RANK=2 must be smaller");
  error_of(with(kTorchrun, "MASTER_PORT", "70000"), "MASTER_PORT='70000'");
  error_of(without(kTorchrun, "MASTER_ADDR"), "MASTER_ADDR is not set");
  // A SLURM allocation's node list names rank 0's host only when SLURM launched the ranks.
  error_of(with(without(kTorchrun, "MASTER_ADDR"), "SLURM_JOB_NODELIST", "node[01-02]"),
           "MASTER_ADDR is not set");
  error_of({{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
           "OMPI_COMM_WORLD_RANK='x'");
}

TEST_CASE("dist env: bareyolo's spawned workers refuse to spawn again") {
  EnvMap spawned = {{"RANK", "1"},
                    {"WORLD_SIZE", "2"},
                    {"MASTER_PORT", "40000"},
                    {"BAREYOLO_SPAWNED", "1"},
                    {"BAREYOLO_STORE_TOKEN", "secret"}};
  LaunchEnv env = read_launch_env(spawned);
  CHECK(env.launcher == Launcher::bareyolo);
  CHECK(env.store_token == "secret");
  CHECK(env.store_port() == 40000);
  CHECK_THROWS_WITH_AS(env.refuse_nested_spawn(),
                       doctest::Contains("this process was started by bareyolo's launcher as "
                                         "rank 1; it must not spawn workers itself"),
                       std::runtime_error);
  CHECK_NOTHROW(read_launch_env(kTorchrun).refuse_nested_spawn());
}

TEST_CASE("dist env: OpenMPI's variables") {
  LaunchEnv env = read_launch_env({{"OMPI_COMM_WORLD_RANK", "5"},
                                   {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                   {"OMPI_COMM_WORLD_SIZE", "8"},
                                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                   {"MASTER_ADDR", "head"},
                                   {"MASTER_PORT", "29400"}});
  CHECK(env.launcher == Launcher::openmpi);
  CHECK(env.rank == 5);
  CHECK(env.local_rank == 1);
  CHECK(env.world_size == 8);
  CHECK(env.local_world_size == 4);
  CHECK(env.store_port() == 29400);
}

TEST_CASE("dist env: SLURM tasks and the master from the node list, and one task is no launcher") {
  EnvMap slurm = {{"SLURM_PROCID", "2"},
                  {"SLURM_LOCALID", "0"},
                  {"SLURM_NTASKS", "4"},
                  {"SLURM_NTASKS_PER_NODE", "2"},
                  {"SLURM_JOB_NODELIST", "node[01-04,07],gpu5"},
                  {"SLURM_JOB_ID", "123456"}};
  LaunchEnv env = read_launch_env(slurm);
  CHECK(env.launcher == Launcher::slurm);
  CHECK(env.rank == 2);
  CHECK(env.local_rank == 0);
  CHECK(env.world_size == 4);
  CHECK(env.local_world_size == 2);
  CHECK(env.master_addr == "node01");
  CHECK(env.store_port() == 20000 + 123456 % 20000);
  CHECK(env.store_token == "slurm:123456.");
  CHECK(read_launch_env(with(slurm, "BAREYOLO_STORE_TOKEN", "t")).store_token == "t");
  CHECK(read_launch_env(with(slurm, "MASTER_ADDR", "head")).master_addr == "head");
  CHECK(read_launch_env(with(slurm, "MASTER_PORT", "29000")).store_port() == 29000);
  CHECK_FALSE(read_launch_env(with(slurm, "SLURM_NTASKS", "1")).launched());
  // torchrun inside an allocation: torchrun's variables win.
  CHECK(read_launch_env(with(with(slurm, "RANK", "0"), "WORLD_SIZE", "1")).launcher ==
        Launcher::manual);
}

TEST_CASE("dist env: SLURM's compressed node lists") {
  CHECK(slurm_first_host("node[01-04,07],gpu5") == "node01");
  CHECK(slurm_first_host("gpu5,node[01-02]") == "gpu5");
  CHECK(slurm_first_host("node[07,01-04]") == "node07");
  CHECK(slurm_first_host("rack[2-3]-n[5,9]") == "rack2-n5");
  CHECK(slurm_first_host("single") == "single");
  for (const char* bad : {"", "node[01-04", "node]01[", ",node1"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(slurm_first_host(bad), doctest::Contains("SLURM_JOB_NODELIST"),
                         std::runtime_error);
  }
}

}  // namespace
}  // namespace bareyolo::dist

TEST_CASE("dist env: a store on every interface refuses an empty or guessable token") {
  // Before: rank 0 served an empty or "torchrun:none" token on 0.0.0.0, and a client presenting
  // it could read every key.
  bareyolo::dist::LaunchEnv env;
  env.launcher = bareyolo::dist::Launcher::torchrun;
  env.world_size = 2;
  env.master_addr = "192.0.2.1";  // another machine's address: the store binds 0.0.0.0
  env.master_port = 29500;
  bareyolo::dist::ProcessGroupOptions options;
  options.timeout = std::chrono::seconds(1);
  for (const char* token : {"", "torchrun:none", "slurm:1234."}) {
    env.store_token = token;
    CHECK_THROWS_WITH_AS(bareyolo::dist::init_process_group(env, options),
                         doctest::Contains("set BAREYOLO_STORE_TOKEN to the same secret on every "
                                           "node"),
                         std::runtime_error);
  }
}

TEST_CASE("dist env: whether the token is a given secret, and torchrun's restart count") {
  bareyolo::dist::EnvMap env = {{"RANK", "0"},
                                {"WORLD_SIZE", "2"},
                                {"LOCAL_RANK", "0"},
                                {"LOCAL_WORLD_SIZE", "2"},
                                {"MASTER_ADDR", "127.0.0.1"},
                                {"MASTER_PORT", "29500"},
                                {"TORCHELASTIC_RUN_ID", "none"}};
  bareyolo::dist::LaunchEnv read = bareyolo::dist::read_launch_env(env);
  CHECK_FALSE(read.store_token_given);
  CHECK(read.restart_count == 0);
  CHECK(bareyolo::dist::derives_local_token(read));
  env["BAREYOLO_STORE_TOKEN"] = "a-shared-secret";
  env["TORCHELASTIC_RESTART_COUNT"] = "2";
  read = bareyolo::dist::read_launch_env(env);
  CHECK(read.store_token_given);
  CHECK(read.store_token == "a-shared-secret");
  CHECK(read.restart_count == 2);
  CHECK_FALSE(bareyolo::dist::derives_local_token(read));  // a given secret is used as it is
}
