// engine/distributed/comm/store.cpp — the store's client: one connection, one request at a time,
// every wait bounded by the timeout (protocol and invariants: store.h; the server:
// store_server.cpp).
#include "engine/distributed/comm/store.h"

#include <charconv>
#include <stdexcept>

#include "engine/distributed/comm/progress_board.h"
#include "engine/distributed/comm/store_protocol.h"
#include "engine/distributed/comm/token_proof.h"
#include "engine/distributed/process_name.h"

namespace bareyolo::dist {
namespace {

using namespace store_protocol;

std::string quoted_keys(const std::vector<std::string>& keys) {
  std::string text;
  for (const auto& key : keys) text += (text.empty() ? "'" : ", '") + key + "'";
  return text;
}

}  // namespace

Store::Store(std::string host, int port, std::string token, std::chrono::milliseconds timeout)
    : Store(std::move(host), port, std::move(token), timeout, Clock::now() + timeout) {}

Store::Store(std::string host, int port, std::string token, std::chrono::milliseconds timeout,
             Clock::time_point connect_by, std::chrono::milliseconds handshake_timeout)
    : host_(std::move(host)),
      port_(port),
      token_(std::move(token)),
      timeout_(timeout),
      handshake_timeout_(handshake_timeout) {
  connect(connect_by);
}

std::string Store::address() const { return host_ + ":" + std::to_string(port_); }

void Store::connect(Clock::time_point deadline) {
  try {
    socket_ = connect_tcp(host_, port_, deadline);
  } catch (const std::runtime_error& error) {
    if (Clock::now() < deadline) throw;  // not a wait that ran out (an unknown host, ...)
    throw StoreUnreachable(error.what());
  }
  limit_unacknowledged_sends(socket_.get());  // requests and replies are small: see socket.h
  const std::string nonce = random_nonce();
  const std::string challenge = greeting(nonce);
  const std::string answer =
      request(kProve, {token_proof(token_, "store client", challenge, nonce)},
              "the answer to this process's proof of the token", handshake_timeout_);
  if (!same_proof(answer, token_proof(token_, "store server", nonce, challenge))) {
    socket_.reset();
    throw std::runtime_error("the store at " + address() +
                             " did not prove it holds this run's token: is another run's store "
                             "on this port?");
  }
}

std::string Store::greeting(const std::string& client_nonce) {
  auto foreign = [&](const std::string& why) {
    socket_.reset();
    return std::runtime_error(
        "the process listening on " + address() + " is not bareyolo's store: " + why +
        ". Another program holds this port: choose a free one (MASTER_PORT, or --master-port), "
        "the same on every rank");
  };
  std::optional<Frame> reply;
  try {
    reply = exchange(encode_frame(kHello, {kMagic, this_process_name(), client_nonce}),
                     Clock::now() + handshake_timeout_);
  } catch (const LinkLost&) {  // a cut link, not another program on the port
    socket_.reset();
    throw;
  } catch (const std::runtime_error& error) {
    throw foreign(std::string("its answer to the store's handshake: ") + error.what());
  }
  if (!reply)
    throw foreign("it accepted the connection but did not answer the store's handshake within " +
                  seconds_text(handshake_timeout_));
  std::string payload = reply->fields.empty() ? "" : std::move(reply->fields[0]);
  if (reply->tag == kRefused) {  // a bareyolo store of another version
    socket_.reset();
    throw std::runtime_error("the store at " + address() + ": " + payload);
  }
  if (reply->tag != kOk || reply->fields.size() != 1)
    throw foreign("it answered the store's handshake with a frame outside the protocol (tag " +
                  std::to_string(reply->tag) + ")");
  return payload;
}

std::string Store::request(uint8_t tag, const std::vector<std::string_view>& fields,
                           const std::string& waiting_for, std::chrono::milliseconds limit) {
  const Clock::time_point deadline = Clock::now() + limit;
  if (!socket_) connect(deadline);
  std::optional<Frame> reply;
  try {
    reply = exchange(encode_frame(tag, fields), deadline);
  } catch (...) {
    socket_.reset();  // a reply may still come: this connection is out of step now
    throw;
  }
  if (!reply) {
    socket_.reset();
    throw std::runtime_error("timed out after " + seconds_text(limit) + " waiting for " +
                             waiting_for + " from the store at " + address() +
                             " (the timeout is settable; is every rank running?)");
  }
  std::string payload = reply->fields.empty() ? "" : std::move(reply->fields[0]);
  if (reply->tag == kRefused) socket_.reset();
  if (reply->tag != kOk) throw std::runtime_error("the store at " + address() + ": " + payload);
  return payload;
}

std::string Store::request(uint8_t tag, const std::vector<std::string_view>& fields,
                           const std::string& waiting_for) {
  return request(tag, fields, waiting_for, timeout_);
}

std::optional<Frame> Store::exchange(const std::string& frame, Clock::time_point deadline) {
  const std::string peer = "the store at " + address();
  std::string header(kHeaderBytes, '\0');
  if (!send_all(socket_.get(), frame.data(), frame.size(), deadline, peer) ||
      !recv_all(socket_.get(), header.data(), header.size(), deadline, peer))
    return std::nullopt;
  const uint64_t body_bytes = read_u64(header.data());
  if (body_bytes == 0 || body_bytes > kMaxBodyBytes)
    throw std::runtime_error(peer + " sent a header announcing " + std::to_string(body_bytes) +
                             " bytes, outside the protocol");
  std::string body(body_bytes, '\0');
  if (!recv_all(socket_.get(), body.data(), body.size(), deadline, peer)) return std::nullopt;
  auto reply = decode_body(body);
  if (!reply || reply->fields.size() > 1)
    throw std::runtime_error(peer + " sent a reply outside the protocol");
  return reply;
}

void Store::set(const std::string& key, std::string_view value) {
  request(kSet, {key, value}, "the acknowledgement of set('" + key + "')");
}

// A get or wait blocks until another rank sets the key: waiting for peers (progress_board.h).
std::string Store::get(const std::string& key) {
  const WaitingForPeers waiting;
  return request(kGet, {key}, "key '" + key + "'");
}

void Store::wait(const std::vector<std::string>& keys) {
  if (keys.empty()) return;
  const WaitingForPeers waiting;
  std::vector<std::string_view> fields(keys.begin(), keys.end());
  request(kWait, fields, "keys " + quoted_keys(keys));
}

int64_t Store::add(const std::string& key, int64_t delta) {
  std::string payload =
      request(kAdd, {key, std::to_string(delta)}, "the new value of counter '" + key + "'");
  int64_t value = 0;
  auto [stop, error] = std::from_chars(payload.data(), payload.data() + payload.size(), value);
  if (error != std::errc() || stop != payload.data() + payload.size())
    throw std::runtime_error("the store at " + address() + " answered add('" + key + "') with '" +
                             payload + "', not an integer");
  return value;
}

bool Store::check(const std::string& key) {
  return request(kCheck, {key}, "check('" + key + "')") == "1";
}

}  // namespace bareyolo::dist
