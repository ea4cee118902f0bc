// engine/distributed/comm/store_service.cpp — see store_service.h.
#include "engine/distributed/comm/store_service.h"

#include <algorithm>
#include <charconv>

#include "engine/distributed/comm/token_proof.h"

namespace bareyolo::dist {
namespace {

using namespace store_protocol;

std::optional<int64_t> parse_int64(std::string_view text) {
  int64_t value = 0;
  auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || stop != text.data() + text.size())
    return std::nullopt;
  return value;
}

void reply(StoreConnection& connection, uint8_t tag, const std::vector<std::string_view>& fields) {
  connection.output += encode_frame(tag, fields);
}

}  // namespace

// A loop, never a recursion per frame, and the served bytes erased once at the end, not frame
// by frame: a client may pipeline a megabyte of small requests, and each must cost neither a
// stack frame nor a move of all the bytes behind it.
void StoreService::serve_input(StoreConnection& connection) {
  std::string& input = connection.input;
  size_t served = 0;
  while (!connection.parked && !connection.closing && input.size() - served >= kHeaderBytes) {
    const uint64_t body_bytes = read_u64(input.data() + served);
    const uint64_t limit = connection.greeted ? kMaxBodyBytes : kMaxHelloBodyBytes;
    if (body_bytes > limit) {
      refuse(connection, "the frame is larger than allowed");
      break;
    }
    if (input.size() - served - kHeaderBytes < body_bytes) break;
    auto frame = decode_body(std::string_view(input).substr(served + kHeaderBytes, body_bytes));
    served += kHeaderBytes + body_bytes;
    if (!frame) {
      refuse(connection, "the frame is malformed");
      break;
    }
    if (!connection.greeted) {
      greet(connection, *frame);
    } else {
      serve_request(connection, std::move(*frame));
    }
  }
  input.erase(0, std::min(served, input.size()));  // a refusal has cleared it already
}

// The challenge-response of store.h: HELLO, then PROVE. A client that speaks the protocol
// but fails its proof is a rank of this job started with another BAREYOLO_STORE_TOKEN far
// more often than a stranger: the ranks waiting for it would wait out the whole timeout (3
// hours), so from then on every wait that cannot be answered at once fails, naming it.
void StoreService::greet(StoreConnection& connection, const Frame& frame) {
  if (connection.server_nonce.empty()) {
    bool valid = frame.tag == kHello && frame.fields.size() == 3 && frame.fields[0] == kMagic;
    if (!valid) return refuse(connection, "it does not speak bareyolo's store protocol");
    connection.who = frame.fields[1];
    connection.client_nonce = frame.fields[2];
    connection.server_nonce = random_nonce();
    return reply(connection, kOk, {connection.server_nonce});
  }
  if (frame.tag != kProve || frame.fields.size() != 1)
    return refuse(connection, "it did not answer the challenge");
  const std::string expected =
      token_proof(token_, "store client", connection.server_nonce, connection.client_nonce);
  if (!same_proof(frame.fields[0], expected)) {
    refused_peer_ = connection.who + " at " + connection.peer;
    refuse(connection,
           "its token differs from this run's (another run, or a stale "
           "BAREYOLO_STORE_TOKEN)");
    return serve_parked();
  }
  connection.greeted = true;
  reply(connection, kOk,
        {token_proof(token_, "store server", connection.client_nonce, connection.server_nonce)});
}

void StoreService::refuse(StoreConnection& connection, const std::string& reason) {
  reply(connection, kRefused, {"refused this connection: " + reason});
  connection.closing = true;
  connection.input.clear();
}

void StoreService::serve_request(StoreConnection& connection, Frame frame) {
  const auto& fields = frame.fields;
  bool one_key = fields.size() == 1;
  switch (frame.tag) {
    case kSet:
      if (fields.size() != 2) break;
      table_[fields[0]] = fields[1];
      reply(connection, kOk, {});
      return serve_parked();
    case kAdd:
      if (fields.size() != 2) break;
      return add(connection, fields[0], fields[1]);
    case kCheck:
      if (!one_key) break;
      if (!table_.contains(fields[0]) && !refused_peer_.empty())
        return reply(connection, kError, {refused_peer_error()});
      return reply(connection, kOk, {table_.contains(fields[0]) ? "1" : "0"});
    case kGet:
    case kWait:
      if (fields.empty() || (frame.tag == kGet && !one_key)) break;
      connection.parked = std::move(frame);
      answer_parked(connection);
      return;
  }
  refuse(connection, "request tag " + std::to_string(frame.tag) + " with " +
                         std::to_string(fields.size()) + " fields is not in the protocol");
}

void StoreService::add(StoreConnection& connection, const std::string& key,
                       const std::string& delta_text) {
  auto delta = parse_int64(delta_text);
  auto found = table_.find(key);
  auto current = found == table_.end() ? std::optional<int64_t>(0) : parse_int64(found->second);
  int64_t sum = 0;
  if (!delta || !current || __builtin_add_overflow(*current, *delta, &sum)) {
    return reply(connection, kError,
                 {"add('" + key + "', '" + delta_text +
                  "') needs an integer delta and a key that holds an integer, and a sum "
                  "within 64 bits; set() a counter only through add()"});
  }
  std::string value = std::to_string(sum);
  table_[key] = value;
  reply(connection, kOk, {value});
  serve_parked();
}

bool StoreService::answer_parked(StoreConnection& connection) {
  const Frame& frame = *connection.parked;
  for (const auto& key : frame.fields) {
    if (table_.contains(key)) continue;
    if (refused_peer_.empty()) return false;
    reply(connection, kError, {refused_peer_error()});
    connection.parked.reset();
    return true;
  }
  if (frame.tag == kGet) {
    reply(connection, kOk, {table_.find(frame.fields[0])->second});
  } else {
    reply(connection, kOk, {});
  }
  connection.parked.reset();
  return true;
}

// Every parked connection that can be answered now is, and goes on with its input. The
// nesting (its input may SET a key another waits for) is at most one level per connection:
// a connection being served is not parked.
void StoreService::serve_parked() {
  for (auto& connection : connections_)
    if (connection->parked && !connection->dropped && answer_parked(*connection))
      serve_input(*connection);
}

std::string StoreService::refused_peer_error() const {
  return "a process (" + refused_peer_ +
         ") presented another store token and was refused, so a rank of this job may never "
         "arrive: start every node with the same BAREYOLO_STORE_TOKEN";
}

}  // namespace bareyolo::dist
