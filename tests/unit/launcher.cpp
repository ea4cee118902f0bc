// tests/unit/launcher.cpp — the launcher's arithmetic without forking: global ranks over
// several nodes, the environment each worker gets (read back through env.h, so the launcher
// and rank discovery agree), and one error per inconsistent plan. The forking half is in
// tests/dist/launcher.cpp.
#include <doctest/doctest.h>

#include <chrono>
#include <set>
#include <stdexcept>

#include "engine/distributed/launch/launcher.h"

namespace bareyolo::dist {
namespace {

LaunchPlan two_node_plan() {
  LaunchPlan plan;
  plan.nproc = 4;
  plan.nnodes = 2;
  plan.node_rank = 1;
  plan.master_addr = "10.1.2.3";
  plan.master_port = 29500;
  plan.store_token = "shared-secret";
  return plan;
}

TEST_CASE("dist launcher: global ranks are node_rank x nproc + local_rank, each once") {
  LaunchPlan plan;
  plan.nproc = 2;
  plan.nnodes = 3;
  plan.master_port = 29500;
  plan.store_token = "t";
  CHECK(plan.world_size() == 6);
  std::set<int> seen;
  for (plan.node_rank = 0; plan.node_rank < plan.nnodes; ++plan.node_rank) {
    for (int local_rank = 0; local_rank < plan.nproc; ++local_rank) {
      int rank = plan.global_rank(local_rank);
      CHECK(rank / plan.nproc == plan.node_rank);
      CHECK(rank % plan.nproc == local_rank);
      CHECK(seen.insert(rank).second);
    }
  }
  CHECK(seen.size() == 6);
  CHECK(*seen.rbegin() == 5);
}

TEST_CASE("dist launcher: a worker's environment reads back as the launcher meant it") {
  LaunchPlan plan = two_node_plan();
  EnvMap env = worker_environment(plan, 2, 29500, "shared-secret");
  CHECK(env.at("RANK") == "6");
  CHECK(env.at("LOCAL_RANK") == "2");
  CHECK(env.at("WORLD_SIZE") == "8");
  CHECK(env.at("LOCAL_WORLD_SIZE") == "4");

  LaunchEnv read = read_launch_env(env);
  CHECK(read.launcher == Launcher::bareyolo);
  CHECK(read.spawned_by_bareyolo);
  CHECK(read.rank == 6);
  CHECK(read.local_rank == 2);
  CHECK(read.world_size == 8);
  CHECK(read.local_world_size == 4);
  CHECK(read.master_addr == "10.1.2.3");
  CHECK(read.master_port == 29500);
  CHECK(read.store_port() == 29500);
  CHECK(read.store_token == "shared-secret");
  // The recursion guard sees a worker.
  CHECK_THROWS_WITH_AS(read.refuse_nested_spawn(), doctest::Contains("must not spawn"),
                       std::runtime_error);
}

TEST_CASE("dist launcher: inconsistent plans are refused naming the field") {
  auto refused = [](LaunchPlan plan, const char* expected) {
    CHECK_THROWS_WITH_AS(plan.validate(), doctest::Contains(expected), std::runtime_error);
  };
  two_node_plan().validate();  // the base plan is valid
  LaunchPlan plan = two_node_plan();
  plan.node_rank = 2;
  refused(plan, "node_rank=2 must be in [0, nnodes=2)");
  plan = two_node_plan();
  plan.master_port = 0;
  refused(plan, "nnodes=2 needs master_port");
  plan = two_node_plan();
  plan.store_token.clear();
  refused(plan, "nnodes=2 needs a store token");
  plan = two_node_plan();
  plan.cuda_indices = {0, 1};
  refused(plan, "2 CUDA devices for nproc=4 workers");
  plan.cuda_indices = {0, 1, -1, 2};
  refused(plan, "CUDA device index -1");
  plan = two_node_plan();
  plan.nproc = 0;
  refused(plan, "nproc=0");
  plan = two_node_plan();
  plan.master_port = 70000;
  refused(plan, "master_port=70000 is not a TCP port");
  plan = two_node_plan();
  plan.master_addr.clear();
  refused(plan, "master_addr is empty");
  plan = two_node_plan();
  plan.nnodes = 0;
  refused(plan, "nnodes=0");
  plan = two_node_plan();
  plan.grace = -std::chrono::milliseconds(1500);
  refused(plan, "grace=-1.5 s is negative");

  LaunchPlan one_node;  // one node may pick its port and its token itself
  one_node.nproc = 3;
  one_node.validate();
}

}  // namespace
}  // namespace bareyolo::dist
