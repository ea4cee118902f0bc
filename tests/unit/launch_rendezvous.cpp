// tests/unit/launch_rendezvous.cpp — joining a job as a wait of its own (rendezvous.h): a rank
// whose peers never come says what it waits for and gives up at the rendezvous timeout, not
// at the 3-hour collective one; a listener on the store's port that is not bareyolo's store
// (silent, or answering garbage) fails the join at once, naming the address. Ranks are
// threads over loopback; every timeout is short, so a broken rendezvous fails, never hangs.
#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/distributed/comm/socket.h"
#include "engine/distributed/comm/store.h"
#include "engine/distributed/launch/process_group.h"
#include "engine/distributed/launch/rendezvous.h"

namespace bareyolo::dist {
namespace {

using namespace std::chrono_literals;

const std::string kToken = "rendezvous-test";

// Rank `rank` of a job of `world_size` on this machine, its store at 127.0.0.1:port.
LaunchEnv rank_env(int rank, int world_size, int port) {
  LaunchEnv env;
  env.launcher = Launcher::manual;
  env.rank = rank;
  env.world_size = env.local_world_size = world_size;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  env.store_token = kToken;
  return env;
}

// Progress lines, collected from any thread.
struct Lines {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& line) {
      std::lock_guard lock(mutex);
      lines.push_back(line);
    };
  }
  size_t count_containing(const std::string& part) {
    std::lock_guard lock(mutex);
    size_t count = 0;
    for (const auto& line : lines) count += line.find(part) != std::string::npos;
    return count;
  }
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A port nobody listens on (at the moment of the call).
int free_port() {
  Fd probe = listen_tcp("127.0.0.1", 0);
  return bound_port(probe.get());
}

// Joins as init_process_group does (rank 0 serves the store), with a rendezvous of `timeout`
// (1 s) and progress every 0.2 s while the collective timeout stays at its 3 hours: what it
// threw, or "" when every rank joined.
std::string join_error(const LaunchEnv& env, Lines& lines, std::chrono::milliseconds timeout = 1s) {
  try {
    JoinWait wait(env, {.timeout = timeout, .progress_interval = 200ms}, lines.sink());
    std::unique_ptr<StoreServer> server;
    if (env.rank == 0) server = std::make_unique<StoreServer>("127.0.0.1", env.master_port, kToken);
    std::unique_ptr<Store> store = connect_to_store(env, kToken, kDefaultStoreTimeout, wait);
    wait_for_every_rank(*store, env, wait);
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "";
}

TEST_CASE("launch rendezvous: rank 0 never comes — progress lines, then the rendezvous timeout") {
  // Before: one line, then 10,800 s of silence (the store connection used the collective's
  // timeout; launch_reliability.sh checks --rendezvous-timeout end to end).
  const int port = free_port();
  Lines lines;
  const auto start = Clock::now();
  const std::string error = join_error(rank_env(1, 2, port), lines);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  CHECK(seconds_since(start) < 5.0);  // 1 s, and slack for a loaded machine
  CHECK(error.find("rank 1 gave up joining the job after 1 s (the rendezvous timeout, "
                   "--rendezvous-timeout): still waiting for rank 0's store at " +
                   address) != std::string::npos);
  CHECK(error.find("Start every rank with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE (2)") !=
        std::string::npos);
  CHECK(lines.count_containing("rank 1: waiting for rank 0's store at " + address) >= 2);
}

TEST_CASE("launch rendezvous: a progress interval of 0 is refused, not an endless loop") {
  CHECK_THROWS_AS(JoinWait(rank_env(1, 2, 29500), {.progress_interval = 0ms}),
                  std::invalid_argument);
}

TEST_CASE("launch rendezvous: a rank that never joins is named, by every rank waiting for it") {
  const int port = free_port();
  Lines lines;
  std::string rank0_error, rank1_error;
  const auto start = Clock::now();
  std::jthread rank0([&] { rank0_error = join_error(rank_env(0, 3, port), lines); });
  std::jthread rank1([&] { rank1_error = join_error(rank_env(1, 3, port), lines); });
  rank0.join();
  rank1.join();
  CHECK(seconds_since(start) < 5.0);  // 1 s, and slack for a loaded machine
  for (const std::string& error : {rank0_error, rank1_error}) {
    INFO(error);
    CHECK(error.find("gave up joining the job after 1 s") != std::string::npos);
    CHECK(error.find("still waiting for rank 2 of 3 to join the job at 127.0.0.1:" +
                     std::to_string(port)) != std::string::npos);
  }
  CHECK(lines.count_containing("rank 0: waiting for rank 2 of 3 to join the job") >= 2);
  CHECK(lines.count_containing("rank 1: waiting for rank 2 of 3 to join the job") >= 2);
}

TEST_CASE("launch rendezvous: ranks that come late, within the timeout, join") {
  const int port = free_port();
  Lines lines;
  std::vector<std::string> errors(3);
  std::vector<std::jthread> ranks;
  for (int rank : {2, 1, 0}) {  // rank 0, whose store the others wait for, comes last
    ranks.emplace_back(
        [&, rank] { errors[size_t(rank)] = join_error(rank_env(rank, 3, port), lines, 20s); });
    std::this_thread::sleep_for(300ms);
  }
  for (auto& rank : ranks) rank.join();
  for (const std::string& error : errors) CHECK(error == "");
  CHECK(lines.count_containing("waiting for rank 0's store") >= 1);
}

TEST_CASE("launch rendezvous: once a process with another token was refused, the join fails") {
  // The rank started with another token will never join: the others are told within
  // seconds, naming it, instead of at the rendezvous timeout.
  const int port = free_port();
  StoreServer server("127.0.0.1", port, kToken);
  LaunchEnv env = rank_env(0, 2, port);
  Store store("127.0.0.1", port, kToken, 5s);
  std::string error;
  const auto start = Clock::now();
  std::jthread rank0([&] {
    JoinWait wait(env, {.timeout = 20s}, [](const std::string&) {});
    try {
      wait_for_every_rank(store, env, wait);
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(200ms);
  CHECK_THROWS_WITH_AS(Store("127.0.0.1", port, "a-stale-token", 1s),
                       doctest::Contains("its token differs"), std::runtime_error);
  rank0.join();
  CHECK(seconds_since(start) < 5.0);
  CHECK(error.find("presented another store token and was refused") != std::string::npos);
}

// A stranger on the store's port: a listener that accepts, says `answer` (nothing: silence)
// and holds the connection open until the test ends.
class StrangerListener {
 public:
  explicit StrangerListener(std::string answer)
      : listening_(listen_tcp("127.0.0.1", 0)), answer_(std::move(answer)) {
    thread_ = std::jthread([this](std::stop_token stop) {
      std::vector<Fd> held;
      while (!stop.stop_requested()) {
        pollfd incoming{listening_.get(), POLLIN, 0};
        if (::poll(&incoming, 1, 20) <= 0) continue;
        held.emplace_back(::accept(listening_.get(), nullptr, nullptr));
        send_all(held.back().get(), answer_.data(), answer_.size(), Clock::now() + 1s, "client");
      }
    });
  }
  int port() const { return bound_port(listening_.get()); }

 private:
  Fd listening_;
  std::string answer_;
  std::jthread thread_;
};

TEST_CASE("launch rendezvous: a silent listener on the store's port is foreign, within seconds") {
  // Before: the rank waited for its HELLO's answer for the whole 3-hour timeout.
  StrangerListener silent("");
  const std::string expected =
      "the process listening on 127.0.0.1:" + std::to_string(silent.port()) +
      " is not bareyolo's store: it accepted the connection but did not answer the store's "
      "handshake within 5 s. Another program holds this port: choose a free one (MASTER_PORT, "
      "or --master-port)";
  const auto start = Clock::now();
  ProcessGroupOptions options{.backend = Backend::tcp, .rendezvous = {.timeout = 60s}};
  CHECK_THROWS_WITH_AS(init_process_group(rank_env(1, 2, silent.port()), options),
                       doctest::Contains(expected.c_str()), std::runtime_error);
  CHECK(seconds_since(start) < 8.0);
}

TEST_CASE("launch rendezvous: under bareyolo's launcher, a rank 0 slow to serve is no stranger") {
  // The launcher binds the port before forking; rank 0 serves it only once it has started
  // (initialising CUDA can take seconds): a rank that connected first must wait for it.
  Fd listening = listen_tcp("127.0.0.1", 0);
  const int port = bound_port(listening.get());
  LaunchEnv rank1 = rank_env(1, 2, port), rank0 = rank_env(0, 2, port);
  rank1.spawned_by_bareyolo = rank0.spawned_by_bareyolo = true;
  std::string rank0_error;
  std::jthread late_rank0([&] {
    std::this_thread::sleep_for(kHandshakeTimeout + 500ms);
    try {
      StoreServer server(std::move(listening), kToken);
      JoinWait wait(rank0, {.timeout = 20s});
      std::unique_ptr<Store> store = connect_to_store(rank0, kToken, 20s, wait);
      wait_for_every_rank(*store, rank0, wait);
    } catch (const std::runtime_error& error) {
      rank0_error = error.what();
    }
  });
  JoinWait wait(rank1, {.timeout = 20s});
  std::unique_ptr<Store> store;
  CHECK_NOTHROW(store = connect_to_store(rank1, kToken, 20s, wait));
  if (store) CHECK_NOTHROW(wait_for_every_rank(*store, rank1, wait));
  store.reset();  // rank 0's server serves on until its last client has left
  late_rank0.join();
  CHECK(rank0_error == "");
}

TEST_CASE("launch rendezvous: a listener that answers garbage is foreign, at once") {
  for (const std::string& garbage : {std::string("SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n"),
                                     std::string("HTTP/1.1 400 Bad Request\r\n\r\n"),
                                     std::string("\x05\0\0\0\0\0\0\0\x2a\0\0\0\0", 13)}) {
    INFO(garbage);
    StrangerListener stranger(garbage);
    const std::string expected =
        "the process listening on 127.0.0.1:" + std::to_string(stranger.port()) +
        " is not bareyolo's store";
    const auto start = Clock::now();
    CHECK_THROWS_WITH_AS(Store("127.0.0.1", stranger.port(), kToken, 60s),
                         doctest::Contains(expected.c_str()), std::runtime_error);
    CHECK(seconds_since(start) < 2.0);
  }
}

}  // namespace
}  // namespace bareyolo::dist
