// tests/unit/store.cpp — the rendezvous store over loopback on ports the OS picks:
// threads (and forked processes) act as ranks. Every call has a short timeout, so a broken
// store fails a test instead of hanging the suite.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>

#include "engine/distributed/comm/socket.h"
#include "engine/distributed/comm/store.h"
#include "engine/distributed/comm/store_service.h"
#include "engine/distributed/comm/token_proof.h"
#include "tests/support/store_greeting.h"

namespace bareyolo::dist {
namespace {

using namespace std::chrono_literals;

const std::string kHost = "127.0.0.1";
const std::string kToken = "run-7f3a";
constexpr auto kTimeout = 5s;  // for calls that must succeed: only reached when broken

Store client_of(const StoreServer& server, std::chrono::milliseconds timeout = kTimeout) {
  return Store(kHost, server.port(), kToken, timeout);
}

// Runs `body` on a thread acting as one rank; an exception fails the test instead of
// terminating the test program; it is joined even when the test body throws.
std::jthread as_rank(std::function<void()> body) {
  return std::jthread([body = std::move(body)] {
    try {
      body();
    } catch (const std::exception& error) {
      FAIL_CHECK("a rank thread failed: " << error.what());
    }
  });
}

// A port nobody listens on (at the moment of the call).
int free_port() {
  Fd probe = listen_tcp(kHost, 0);
  return bound_port(probe.get());
}

size_t open_fd_count() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                           std::filesystem::directory_iterator()));
}

TEST_CASE("dist socket: a socket connected to itself is told apart from a real connection") {
  // Bound to a port the OS picked and connected to that same port, a socket connects to
  // itself (TCP's simultaneous open) — what a retrying connect on loopback can run into.
  Fd self(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(self.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  address.sin_port = htons(uint16_t(bound_port(self.get())));
  REQUIRE(::connect(self.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  CHECK(is_self_connection(self.get()));
  Fd listener = listen_tcp(kHost, 0);
  Fd client = connect_tcp(kHost, bound_port(listener.get()), Clock::now() + kTimeout);
  CHECK_FALSE(is_self_connection(client.get()));
}

TEST_CASE("dist socket: connections are watched for a cut link, names the peer when lost") {
  // The behaviour (a cut link ends a job in seconds, a stopped rank does not) is tested in
  // tests/shell/link_cut.sh, in a network namespace; these are the settings it rests on.
  auto option = [](int fd, int level, int name) {
    int value = -1;
    socklen_t length = sizeof value;
    REQUIRE(::getsockopt(fd, level, name, &value, &length) == 0);
    return value;
  };
  Fd listener = listen_tcp(kHost, 0);
  Fd client = connect_tcp(kHost, bound_port(listener.get()), Clock::now() + kTimeout);
  CHECK(option(client.get(), SOL_SOCKET, SO_KEEPALIVE) == 1);
  const int idle = option(client.get(), IPPROTO_TCP, TCP_KEEPIDLE);
  const int interval = option(client.get(), IPPROTO_TCP, TCP_KEEPINTVL);
  const int probes = option(client.get(), IPPROTO_TCP, TCP_KEEPCNT);
  CHECK(idle + interval * probes == kLinkLossTimeout.count());
  // A stream's sender must outwait a peer that stops reading: no TCP_USER_TIMEOUT by default.
  CHECK(option(client.get(), IPPROTO_TCP, TCP_USER_TIMEOUT) == 0);
  limit_unacknowledged_sends(client.get());
  CHECK(option(client.get(), IPPROTO_TCP, TCP_USER_TIMEOUT) == 1000 * kLinkLossTimeout.count());
  CHECK(std::string(LinkLost("rank 1 (10.0.0.2:41234)").what()) ==
        "rank 1 (10.0.0.2:41234) unreachable: no TCP acknowledgement for 8 s — the network link "
        "was cut or the host is down");
}

TEST_CASE("dist store: set and get across ranks, check never waits") {
  StoreServer server(kHost, 0, kToken);
  CHECK(server.port() > 0);
  Store rank0 = client_of(server);  // rank 0 is a client of its own server
  std::jthread rank1 = as_rank([&] {
    Store store = client_of(server);
    store.set("rank1/address", "10.0.0.2:4000");
    CHECK(store.get("rank0/address") == "10.0.0.1:4000");
  });
  rank0.set("rank0/address", "10.0.0.1:4000");
  CHECK(rank0.get("rank1/address") == "10.0.0.2:4000");
  rank1.join();
  CHECK(rank0.check("rank1/address"));
  CHECK_FALSE(rank0.check("never/set"));
  rank0.set("empty", "");
  CHECK(rank0.get("empty").empty());
  rank0.set("rank0/address", "overwritten");
  CHECK(rank0.get("rank0/address") == "overwritten");
}

TEST_CASE("dist store: wait blocks until another client sets every key") {
  StoreServer server(kHost, 0, kToken);
  Store waiter = client_of(server);
  std::atomic<bool> both_set = false;
  std::jthread setter = as_rank([&] {
    Store store = client_of(server);
    store.set("a", "1");
    std::this_thread::sleep_for(50ms);
    both_set = true;
    store.set("b", "2");
  });
  waiter.wait({"a", "b"});
  CHECK(both_set);
  setter.join();
  waiter.wait({});
}

TEST_CASE("dist store: add is atomic under concurrent clients") {
  StoreServer server(kHost, 0, kToken);
  std::vector<std::jthread> ranks;
  for (int rank = 0; rank < 4; ++rank) {
    ranks.push_back(as_rank([&] {
      Store store = client_of(server);
      for (int i = 0; i < 100; ++i) store.add("arrivals", 1);
    }));
  }
  for (auto& rank : ranks) rank.join();
  Store store = client_of(server);
  CHECK(store.add("arrivals", 0) == 400);
  CHECK(store.get("arrivals") == "400");
  CHECK(store.add("arrivals", -401) == -1);
  store.set("text", "abc");
  CHECK_THROWS_WITH_AS(store.add("text", 1), doctest::Contains("add('text', '1')"),
                       std::runtime_error);
  CHECK(store.add("fresh", INT64_MAX) == INT64_MAX);
  CHECK_THROWS_WITH_AS(store.add("fresh", 1), doctest::Contains("within 64 bits"),
                       std::runtime_error);
  CHECK(store.add("fresh", -INT64_MAX) == 0);  // the connection survives an ERROR reply
}

TEST_CASE("dist store: a missing key times out naming the key and the store and the seconds") {
  StoreServer server(kHost, 0, kToken);
  Store store = client_of(server, 200ms);
  auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(store.get("nccl/unique_id"),
                       doctest::Contains(("timed out after 0.2 s waiting for key "
                                          "'nccl/unique_id' from the store at 127.0.0.1:" +
                                          std::to_string(server.port()))
                                             .c_str()),
                       std::runtime_error);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  CHECK_THROWS_WITH_AS(store.wait({"x", "y"}), doctest::Contains("keys 'x', 'y'"),
                       std::runtime_error);
  store.set("late", "v");  // reconnects after the abandoned request
  CHECK(store.get("late") == "v");
}

TEST_CASE("dist store: a store whose process died is said to be gone, at once, not slow") {
  // Rank 0 died: the kernel closed its end. Waiting out the timeout (3 h by default) for a reply
  // that cannot come, or saying "timed out" at once, would hide what happened.
  Fd listening = listen_tcp(kHost, 0);
  const int port = bound_port(listening.get());
  const pid_t host = ::fork();
  REQUIRE(host >= 0);
  if (host == 0) {  // rank 0's process: serves until it is killed
    ::alarm(10);
    StoreServer server(std::move(listening), kToken);
    while (true) ::pause();
  }
  listening.reset();
  Store store(kHost, port, kToken, kTimeout);
  store.set("before", "v");
  ::kill(host, SIGKILL);
  int status = 0;
  ::waitpid(host, &status, 0);
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    store.get("after");
  } catch (const std::runtime_error& error) {
    message = error.what();
  }
  INFO(message);
  // EOF, or a reset if the kernel answered the request first: either way the connection.
  CHECK((message.find("closed the connection") != std::string::npos ||
         message.find("lost the connection") != std::string::npos));
  CHECK(message.find("timed out") == std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
}

TEST_CASE("dist store: a stopping server serves its clients until they have left") {
  // Rank 0 may finish first and destroy its server while another rank still needs the store.
  auto server = std::make_unique<StoreServer>(kHost, 0, kToken);
  auto store = std::make_unique<Store>(client_of(*server));
  // A client that gave up on a GET has closed its connection, which the server must notice
  // although it parked the request: else it would wait out its whole linger for it.
  Store abandoned = client_of(*server, 200ms);
  CHECK_THROWS_AS(abandoned.get("never"), std::runtime_error);
  store->set("run_dir", "runs/train/exp");
  std::atomic<bool> stopped{false};
  std::jthread stopping([&] {
    server.reset();
    stopped = true;
  });
  std::this_thread::sleep_for(200ms);
  CHECK_FALSE(stopped.load());
  CHECK(store->get("run_dir") == "runs/train/exp");  // served after the stop was asked
  const auto left = std::chrono::steady_clock::now();
  store.reset();  // the last client leaves: the server stops at once
  stopping.join();
  CHECK(stopped.load());
  CHECK(std::chrono::steady_clock::now() - left < 2s);
}

TEST_CASE("dist store: a wrong token is refused and the server keeps serving") {
  StoreServer server(kHost, 0, kToken);
  Store good = client_of(server);
  CHECK_THROWS_WITH_AS(Store(kHost, server.port(), "another-run", 1s),
                       doctest::Contains("its token differs"), std::runtime_error);
  {  // a stranger that speaks another protocol, and one that connects and leaves
    Fd stranger = connect_tcp(kHost, server.port(), Clock::now() + 1s);
    const std::string garbage = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK(send_all(stranger.get(), garbage.data(), garbage.size(), Clock::now() + 1s, "server"));
    char header[8];  // answered at once (refused), not left waiting for a 5 GB "frame"
    CHECK(recv_all(stranger.get(), header, sizeof header, Clock::now() + 1s, "the store"));
    Fd leaver = connect_tcp(kHost, server.port(), Clock::now() + 1s);
  }
  good.set("still", "serving");
  CHECK(client_of(server).get("still") == "serving");
}

TEST_CASE("dist store: once another token was refused, waits fail at once naming its sender") {
  // Before: node 0 waited out the 3-hour timeout for a node started with another token.
  StoreServer server(kHost, 0, kToken);
  Store waiting = client_of(server);  // a rank of node 0, waiting for node 1's rank
  const auto start = Clock::now();
  std::jthread waiter = as_rank([&] {
    CHECK_THROWS_WITH_AS(waiting.get("pg/device/1"),
                         doctest::Contains("presented another store token and was refused"),
                         std::runtime_error);
  });
  std::this_thread::sleep_for(100ms);  // parked
  const std::string me = "pid " + std::to_string(::getpid()) + " on host ";
  CHECK_THROWS_WITH_AS(Store(kHost, server.port(), "a-stale-token", 1s),
                       doctest::Contains("its token differs"), std::runtime_error);
  waiter.join();
  CHECK(Clock::now() - start < 5s);
  // Later waits fail the same way, naming the refused process; keys that exist still answer.
  Store other = client_of(server);
  other.set("present", "yes");
  CHECK(other.get("present") == "yes");
  try {
    other.wait({"missing"});
    FAIL("a wait for a key that may never come returned");
  } catch (const std::runtime_error& error) {
    CHECK(std::string(error.what()).find("(" + me) != std::string::npos);
    CHECK(std::string(error.what()).find("same BAREYOLO_STORE_TOKEN") != std::string::npos);
  }
}

TEST_CASE("dist store: a request sent just before its client closes still takes effect") {
  StoreServer server(kHost, 0, kToken);
  {
    using namespace store_protocol;
    Fd hasty = connect_tcp(kHost, server.port(), Clock::now() + 1s);
    const std::string hello = encode_frame(kHello, {kMagic, "test", "client-nonce"});
    CHECK(send_all(hasty.get(), hello.data(), hello.size(), Clock::now() + 1s, "the store"));
    char header[kHeaderBytes];  // the challenge: OK {server nonce}
    REQUIRE(recv_all(hasty.get(), header, sizeof header, Clock::now() + 1s, "the store"));
    std::string body(read_u64(header), '\0');
    REQUIRE(recv_all(hasty.get(), body.data(), body.size(), Clock::now() + 1s, "the store"));
    const std::optional<Frame> challenge = decode_body(body);
    REQUIRE((challenge && challenge->tag == kOk && challenge->fields.size() == 1));
    const std::string frames =
        encode_frame(kProve,
                     {token_proof(kToken, "store client", challenge->fields[0], "client-nonce")}) +
        encode_frame(kSet, {"k", "v"});  // sent before the proof's answer, then gone
    CHECK(send_all(hasty.get(), frames.data(), frames.size(), Clock::now() + 1s, "the store"));
  }
  CHECK(client_of(server).get("k") == "v");
}

TEST_CASE("dist store: a client started before its server connects once it listens") {
  const int port = free_port();
  std::unique_ptr<StoreServer> server;
  std::jthread late_rank0 = as_rank([&] {
    std::this_thread::sleep_for(100ms);
    server = std::make_unique<StoreServer>(kHost, port, kToken);
  });
  Store early(kHost, port, kToken, kTimeout);
  late_rank0.join();
  early.set("k", "v");
  CHECK(early.get("k") == "v");
  CHECK_THROWS_WITH_AS(Store(kHost, free_port(), kToken, 100ms),
                       doctest::Contains("cannot connect to the store at 127.0.0.1:"),
                       std::runtime_error);
}

TEST_CASE("dist store: proofs of the token are keyed, labelled and never the token") {
  const std::string a = random_nonce(), b = random_nonce();
  CHECK(a.size() == 32);
  CHECK(a != b);
  const std::string proof = token_proof("secret", "store client", a, b);
  CHECK(proof.size() == 64);
  CHECK(proof.find("secret") == std::string::npos);
  CHECK(same_proof(proof, token_proof("secret", "store client", a, b)));
  CHECK_FALSE(same_proof(proof, token_proof("secret2", "store client", a, b)));
  CHECK_FALSE(same_proof(proof, token_proof("secret", "store server", a, b)));
  CHECK_FALSE(same_proof(proof, token_proof("secret", "store client", b, a)));
  // Length-prefixed fields: moving a character from one field to the next changes the proof.
  CHECK_FALSE(same_proof(token_proof("k", "l", "ab", "c"), token_proof("k", "l", "a", "bc")));
  CHECK_FALSE(same_proof(proof, proof.substr(0, 63)));
  // A known answer, from Python's hmac over the same framing (u64 little-endian length, then
  // the bytes, for each of label, first, second).
  CHECK(token_proof("Jefe", "store client", "what do ya want", " for nothing?") ==
        "00983c897b9dbb609b0e063430ed97195682bacc0f737d3285e84f6ff59d9195");
}

TEST_CASE("dist store: values of several megabytes round-trip") {
  StoreServer server(kHost, 0, kToken);
  std::string value(6 << 20, '\0');
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 131 + (i >> 12));
  Store writer = client_of(server);
  Store reader = client_of(server);
  std::jthread read_first = as_rank([&] { CHECK(reader.get("weights") == value); });
  writer.set("weights", value);
  read_first.join();
  CHECK(writer.get("weights") == value);
}

TEST_CASE("dist store: a server given a pre-bound socket serves on it") {
  Fd listening = listen_tcp(kHost, 0);
  int port = bound_port(listening.get());
  StoreServer server(std::move(listening), kToken);
  CHECK(server.port() == port);
  Store store(kHost, port, kToken, kTimeout);
  CHECK(store.add("n", 2) == 2);
}

TEST_CASE("dist store: a forked process acts as rank 1") {
  StoreServer server(kHost, 0, kToken);
  Store rank0 = client_of(server);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // rank 1: no doctest, no return into the parent's code
    ::alarm(10);
    int status = 1;
    try {
      Store store(kHost, server.port(), kToken, kTimeout);
      store.set("rank1/pid", std::to_string(::getpid()));
      status = store.get("rank0/ready") == "yes" ? 0 : 2;
    } catch (...) {
      status = 3;
    }
    ::_exit(status);
  }
  CHECK(rank0.get("rank1/pid") == std::to_string(child));
  rank0.set("rank0/ready", "yes");
  int status = -1;
  auto deadline = std::chrono::steady_clock::now() + kTimeout;
  while (::waitpid(child, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  if (!WIFEXITED(status)) {  // hung: do not leave it behind
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
  }
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("dist store: shutdown closes every descriptor") {
  size_t before = open_fd_count();
  {
    StoreServer server(kHost, 0, kToken);
    Store a = client_of(server);
    Store b = client_of(server);
    a.set("k", "v");
    CHECK(b.get("k") == "v");
    CHECK(open_fd_count() > before);
  }
  CHECK(open_fd_count() == before);
}

TEST_CASE("dist store: the bind address follows MASTER_ADDR") {
  CHECK(store_bind_host("127.0.0.1") == "127.0.0.1");
  CHECK(store_bind_host("localhost") == "127.0.0.1");
  CHECK(store_bind_host("") == "127.0.0.1");
  CHECK(store_bind_host("node01") == "0.0.0.0");
  CHECK(store_bind_host("10.1.2.3") == "0.0.0.0");
}

// Served in one loop, not one nested call per request: 200,000 GETs of a key that exists once
// recursed 200,000 x 3 frames deep, past any stack (a crash, seen while writing the fuzz target
// fuzz/store_requests.cpp), and moved the bytes behind each request once per request. In
// memory, without sockets: the service is all that a client's bytes reach.
TEST_CASE("dist store: 200,000 pipelined requests are all answered, without deep recursion") {
  using namespace store_protocol;
  StoreService service(kToken);
  service.connections().push_back(std::make_unique<StoreConnection>());
  StoreConnection& client = *service.connections().back();
  greet_with_token(service, client, kToken);
  client.input = encode_frame(kSet, {"key", "value"});
  const std::string get = encode_frame(kGet, {"key"});
  constexpr size_t kGets = 200000;
  for (size_t i = 0; i < kGets; ++i) client.input += get;
  service.serve_input(client);
  CHECK(client.input.empty());
  const std::string ok = encode_frame(kOk, {}), value = encode_frame(kOk, {"value"});
  REQUIRE(client.output.size() == ok.size() + kGets * value.size());
  CHECK(client.output.starts_with(ok));
  CHECK(client.output.ends_with(value));
}

}  // namespace
}  // namespace bareyolo::dist
