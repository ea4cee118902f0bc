// engine/distributed/comm/ring_link.cpp — the ring's connections, frames and failure protocol
// (described in ring_link.h). Sockets are non-blocking; run() sends and receives in one loop and
// sleeps in poll() only when neither direction can move.
#include "engine/distributed/comm/ring_link.h"
#include "engine/distributed/comm/token_proof.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace bareyolo::dist {
namespace {

constexpr size_t kHeaderBytes = sizeof(FrameHeader);
constexpr size_t kMaxNoticeBytes = 4096;
// How long a failing rank spends telling its neighbours: they may be failing too.
constexpr auto kNoticeTimeout = std::chrono::seconds(1);
// From this many incoming bytes on, a collective receives on the link's receiving thread.
constexpr size_t kThreadedBytes = size_t{1} << 20;
// Frames handed to one sendmsg(): up to 64 frames = 32 MB, so large sends take few syscalls.
constexpr size_t kFramesPerSend = 64;
// A small collective polls its socket this long before it sleeps in poll(): the neighbour's
// frame is usually due within it, and a thread woken from poll() on an idle core starts ~25 us
// late in a VM (a 4 KB ping-pong on loopback: 8-14 us polling, 60 us sleeping).
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(200);

RingFailure lost(int peer, const std::string& what) {
  return RingFailure(peer, "lost rank " + std::to_string(peer) + ": " + what);
}

int milliseconds_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 1 << 30));
}

std::string host_of(const std::string& address) { return address.substr(0, address.rfind(':')); }
int port_of(const std::string& address) {
  return std::stoi(address.substr(address.rfind(':') + 1));
}

// The IPv4 address of this machine's interface that faces `master_addr` (the one other nodes
// reach this rank by). A UDP "connect" only picks the route; it sends nothing.
std::string address_facing(const std::string& master_addr) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(master_addr.c_str(), "9", &hints, &found) != 0 || found == nullptr)
    throw std::runtime_error("cannot resolve MASTER_ADDR '" + master_addr + "' for the TCP ring");
  Fd probe(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  int rc = ::connect(probe.get(), found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  sockaddr_in local{};
  socklen_t length = sizeof local;
  if (rc != 0 || ::getsockname(probe.get(), reinterpret_cast<sockaddr*>(&local), &length) != 0)
    throw std::runtime_error(
        errno_message("no route from this machine to MASTER_ADDR '" + master_addr + "'"));
  char text[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
  return text;
}

// The hello a rank sends the next one: its rank and its proof of the job's token over the
// listener's challenge (a nonce it published in the store for this ring): the token itself
// never crosses the ring's sockets (token_proof.h).
std::string ring_proof(const std::string& token, const std::string& challenge, int rank) {
  return token_proof(token, "ring", challenge, std::to_string(rank));
}

std::string hello_bytes(int rank, const std::string& proof) {
  std::string hello(kRingHelloMagic, sizeof kRingHelloMagic);
  uint32_t fields[2] = {static_cast<uint32_t>(rank), static_cast<uint32_t>(proof.size())};
  hello.append(reinterpret_cast<const char*>(fields), sizeof fields);
  return hello + proof;
}

// Reads a neighbour's hello on a freshly accepted socket; the rank it claims, or -1 when it is
// not one of ours (another protocol, a wrong proof, silence until `deadline`).
int read_hello(int fd, const std::string& token, const std::string& challenge,
               Clock::time_point deadline) {
  try {
    char head[sizeof kRingHelloMagic + 8];
    if (!recv_all(fd, head, sizeof head, deadline, "a connecting rank")) return -1;
    if (std::memcmp(head, kRingHelloMagic, sizeof kRingHelloMagic) != 0) return -1;
    uint32_t fields[2];
    std::memcpy(fields, head + sizeof kRingHelloMagic, sizeof fields);
    const std::string expected = ring_proof(token, challenge, static_cast<int>(fields[0]));
    if (fields[1] != expected.size()) return -1;  // bounds what is read: one proof's length
    std::string presented(fields[1], '\0');
    if (!recv_all(fd, presented.data(), presented.size(), deadline, "a connecting rank")) return -1;
    return same_proof(presented, expected) ? static_cast<int>(fields[0]) : -1;
  } catch (const std::runtime_error&) {
    return -1;
  }
}

void signal_event(int eventfd) {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t written = ::write(eventfd, &one, sizeof one);
}

void drain_event(int eventfd) {
  uint64_t count;
  [[maybe_unused]] ssize_t got = ::read(eventfd, &count, sizeof count);
}

void set_no_delay(int fd) {
  int yes = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
}

// The frames `bytes` travel in: at least one, an empty one for no bytes (RingPlan says why).
size_t frames_for(size_t bytes) {
  return std::max<size_t>(1, (bytes + kFrameBytes - 1) / kFrameBytes);
}

}  // namespace

void RingPlan::send(const char* data, size_t bytes) {
  for (size_t k = 0, offset = 0; k < frames_for(bytes); ++k, offset += kFrameBytes)
    out.push_back({data + offset, std::min(kFrameBytes, bytes - offset), 0});
}

void RingPlan::forward(const char* data, size_t bytes, size_t first_in) {
  for (size_t k = 0, offset = 0; k < frames_for(bytes); ++k, offset += kFrameBytes)
    out.push_back({data + offset, std::min(kFrameBytes, bytes - offset), first_in + k + 1});
}

size_t RingPlan::receive(char* data, size_t bytes, bool one_frame_buffer) {
  const size_t first = in.size();
  for (size_t k = 0, offset = 0; k < frames_for(bytes); ++k, offset += kFrameBytes)
    in.push_back({one_frame_buffer ? data : data + offset, std::min(kFrameBytes, bytes - offset)});
  return first;
}

// Progress of one direction: `frame` is the one in transit, `offset` the bytes of it (header
// included) already through the socket.
struct RingLink::SendState {
  size_t frame = 0, offset = 0;
};
struct RingLink::RecvState {
  size_t frame = 0, offset = 0;
  FrameHeader header{};
};

RingLink::RingLink(Store& store, int rank, int world_size, const std::string& master_addr,
                   const std::string& token, std::chrono::milliseconds timeout)
    : rank_(rank), world_size_(world_size), token_(token), timeout_(timeout) {
  int wake[2];
  if (::pipe2(wake, O_NONBLOCK | O_CLOEXEC) != 0)
    throw std::runtime_error(errno_message("cannot create the TCP ring's wake-up pipe"));
  wake_read_.reset(wake[0]);
  wake_write_.reset(wake[1]);
  received_event_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  stop_receiving_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!received_event_ || !stop_receiving_)
    throw std::runtime_error(errno_message("cannot create the TCP ring's eventfds"));
  handshake(store, master_addr, Clock::now() + timeout);
  receiver_ = std::thread([this] { serve_receiving(); });
}

RingLink::~RingLink() {
  {
    std::lock_guard lock(handover_mutex_);
    closing_ = true;
  }
  handover_.notify_all();
  if (receiver_.joinable()) receiver_.join();
}

void RingLink::handshake(Store& store, const std::string& master_addr, Clock::time_point deadline) {
  const std::string bind_host = store_bind_host(master_addr);
  Fd listening = listen_tcp(bind_host, 0);
  const std::string own_host = bind_host == "0.0.0.0" ? address_facing(master_addr) : bind_host;
  const std::string challenge = random_nonce();  // before the address: whoever reads it finds it
  store.set("ring/" + std::to_string(rank_) + "/challenge", challenge);
  store.set("ring/" + std::to_string(rank_),
            own_host + ":" + std::to_string(bound_port(listening.get())));

  next_address_ = store.get("ring/" + std::to_string(next()));
  try {
    to_next_ = connect_tcp(host_of(next_address_), port_of(next_address_), deadline);
  } catch (const std::exception& error) {
    throw RingFailure(next(),
                      "rank " + std::to_string(rank_) + " cannot reach its ring neighbour rank " +
                          std::to_string(next()) + " at " + next_address_ + ": " + error.what());
  }
  const std::string hello = hello_bytes(
      rank_, ring_proof(token_, store.get("ring/" + std::to_string(next()) + "/challenge"), rank_));
  if (!send_all(to_next_.get(), hello.data(), hello.size(), deadline,
                "rank " + std::to_string(next())))
    throw lost(next(), "it did not take rank " + std::to_string(rank_) + "'s hello in time");

  // Accept until the previous rank shows up; anything else that connects is closed.
  while (!from_prev_) {
    pollfd entry{listening.get(), POLLIN, 0};
    int ready = ::poll(&entry, 1, milliseconds_until(deadline));
    if (ready == 0 && Clock::now() >= deadline) {
      throw RingFailure(prev(), "timed out after " + seconds_text(timeout_) + ": rank " +
                                    std::to_string(rank_) + " waited for rank " +
                                    std::to_string(prev()) + " to join the TCP ring");
    }
    if (ready <= 0) continue;
    Fd candidate(::accept4(listening.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!candidate) continue;
    watch_link(candidate.get());
    auto hello_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(10));
    if (read_hello(candidate.get(), token_, challenge, hello_deadline) == prev())
      from_prev_ = std::move(candidate);
  }
  set_no_delay(from_prev_.get());
  set_no_delay(to_next_.get());
  prev_address_ = store.get("ring/" + std::to_string(prev()));  // it published it to connect
}

void RingLink::run(const RingPlan& plan, const CollectiveFingerprint& fingerprint,
                   Clock::time_point deadline) {
  const FrameHeader collective = data_header(fingerprint);
  size_t incoming_bytes = 0;
  for (const auto& frame : plan.in) incoming_bytes += frame.bytes;
  // Small collectives stay on this thread: handing over to the receiver would cost more than
  // the bytes.
  const bool threaded = incoming_bytes >= kThreadedBytes;
  drain_event(stop_receiving_.get());
  drain_event(received_event_.get());
  frames_received_.store(0);
  receiver_failed_.store(false);
  receiver_done_.store(!threaded);
  if (threaded) {
    {
      std::lock_guard lock(handover_mutex_);
      receiving_plan_ = &plan;
      receiving_collective_ = &collective;
      receiving_deadline_ = deadline;
      receive_error_ = nullptr;
    }
    handover_.notify_all();
  }

  std::exception_ptr send_error;
  try {
    send_frames(plan, collective, deadline, /*receive_here=*/!threaded);
  } catch (...) {
    send_error = std::current_exception();
    signal_event(stop_receiving_.get());
  }
  // The plan must outlive the receiver's use of it: wait until it is done (it stops at once
  // on stop_receiving_, and at its deadline otherwise).
  std::unique_lock lock(handover_mutex_);
  handover_.wait(lock, [&] { return receiving_plan_ == nullptr; });
  if (receive_error_) std::rethrow_exception(receive_error_);  // the first cause: prev failed
  if (send_error) std::rethrow_exception(send_error);
  partial_total_ = 0;
}

// Sends every outgoing frame of `plan` as it becomes ready, and returns once the receiving is
// done too — by the receiving thread, or here in the same loop when `receive_here`.
void RingLink::send_frames(const RingPlan& plan, const FrameHeader& collective,
                           Clock::time_point deadline, bool receive_here) {
  SendState send;
  RecvState recv;
  auto spin_until = Clock::now() + kSpinBeforeSleep;
  while (true) {
    bool moved = false;
    if (receive_here && try_recv(recv, plan, collective)) {
      frames_received_.store(recv.frame);
      moved = true;
    }
    const bool receiving = receive_here ? recv.frame < plan.in.size() : !receiver_done_.load();
    if (!receiving && receiver_failed_.load()) return;  // run() reports the receiver's error
    const bool sending = send.frame < plan.out.size();
    if (!sending && !receiving) return;
    if (sending &&
        try_send(send, plan, collective, frames_received_.load(std::memory_order_acquire)))
      moved = true;
    if (moved) continue;
    if (receive_here && Clock::now() < spin_until) {
      std::this_thread::yield();  // the core's other threads (a loader's) still get it
      continue;
    }
    const bool send_ready = sending && plan.out[send.frame].after <= frames_received_.load();
    wait_to_send(sending, send_ready, receive_here && receiving, collective, deadline);
    spin_until = Clock::now() + kSpinBeforeSleep;
  }
}

// Hands the kernel the frames that are ready (up to kFramesPerSend) in one sendmsg(): header
// and payload of each frame are separate iovecs, the payload straight from the caller's
// buffer. True when some bytes went out.
bool RingLink::try_send(SendState& state, const RingPlan& plan, const FrameHeader& collective,
                        size_t frames_received) {
  size_t last = state.frame;
  while (last < plan.out.size() && last < state.frame + kFramesPerSend &&
         plan.out[last].after <= frames_received)
    ++last;
  if (state.frame >= last) return false;

  FrameHeader headers[kFramesPerSend];
  iovec pieces[2 * kFramesPerSend];
  size_t piece_count = 0;
  for (size_t frame = state.frame; frame < last; ++frame) {
    const RingPlan::Out& out = plan.out[frame];
    FrameHeader& header = headers[frame - state.frame];
    header = collective;
    header.payload_bytes = static_cast<uint32_t>(out.bytes);
    const size_t skip = frame == state.frame ? state.offset : 0;  // only the first is begun
    if (skip < kHeaderBytes)
      pieces[piece_count++] = {reinterpret_cast<char*>(&header) + skip, kHeaderBytes - skip};
    const size_t payload_skip = skip > kHeaderBytes ? skip - kHeaderBytes : 0;
    pieces[piece_count++] = {const_cast<char*>(out.data) + payload_skip, out.bytes - payload_skip};
  }
  msghdr message{};
  message.msg_iov = pieces;
  message.msg_iovlen = piece_count;
  const ssize_t sent = ::sendmsg(to_next_.get(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (sent < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
    if (errno == ETIMEDOUT) throw link_lost(next());
    // The socket's error was read already (by read_from_next): it said why.
    if (!next_gone_.empty()) throw RingFailure(next(), next_gone_);
    const std::string failure =
        errno_message("rank " + std::to_string(rank_) + " could not send to it");
    // A neighbour that fails sends its abort notice before it closes: read it, so that the
    // error names the rank that died rather than the messenger.
    read_from_next(/*still_sending=*/true);
    throw lost(next(), failure);
  }

  // Advance over the bytes the kernel took, frame by frame.
  size_t left = static_cast<size_t>(sent);
  while (left > 0) {
    const size_t frame_total = kHeaderBytes + plan.out[state.frame].bytes;
    const size_t take = std::min(left, frame_total - state.offset);
    state.offset += take;
    left -= take;
    if (state.offset == frame_total) {
      ++state.frame;
      state.offset = 0;
    }
  }
  // Remember a half-sent frame for abort().
  partial_total_ = 0;
  if (state.offset > 0) {
    FrameHeader header = collective;
    header.payload_bytes = static_cast<uint32_t>(plan.out[state.frame].bytes);
    std::memcpy(partial_header_, &header, kHeaderBytes);
    partial_total_ = kHeaderBytes + header.payload_bytes;
    partial_sent_ = state.offset;
  }
  return true;
}

// One recv() into the header or the payload of the frame in transit. True on progress.
bool RingLink::try_recv(RecvState& state, const RingPlan& plan, const FrameHeader& collective) {
  if (state.frame >= plan.in.size()) return false;
  const RingPlan::In& in = plan.in[state.frame];
  const size_t payload = in.bytes;
  char* target;
  size_t wanted;
  if (state.offset < kHeaderBytes) {
    target = reinterpret_cast<char*>(&state.header) + state.offset;
    wanted = kHeaderBytes - state.offset;
  } else {
    target = in.data + (state.offset - kHeaderBytes);
    wanted = kHeaderBytes + payload - state.offset;
  }
  const ssize_t got = ::recv(from_prev_.get(), target, wanted, MSG_DONTWAIT);
  if (got == 0) {
    throw lost(prev(), "it closed its connection to rank " + std::to_string(rank_) +
                           " (the process exited or was killed)");
  }
  if (got < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
    if (errno == ETIMEDOUT) throw link_lost(prev());
    throw lost(prev(),
               errno_message("rank " + std::to_string(rank_) + " could not receive from it"));
  }
  const bool header_was_partial = state.offset < kHeaderBytes;
  state.offset += static_cast<size_t>(got);

  if (header_was_partial && state.offset == kHeaderBytes) {
    const FrameHeader& header = state.header;
    const std::string who = "rank " + std::to_string(prev());
    if (header.kind == kAbort)
      throw_notice(from_prev_.get(), prev(), header.payload_bytes, header.sequence);
    if (header.kind == kGoodbye) {
      throw RingFailure(prev(), who + " left the job (destroyed its communicator) while rank " +
                                    std::to_string(rank_) + " expected " +
                                    to_string(collective_of(collective)) +
                                    " from it: did the ranks issue different numbers of "
                                    "collectives?");
    }
    if (header.kind != kData)
      throw RingFailure(prev(), who + " sent bytes that are not a TCP ring frame");
    if (!same_collective(header, collective)) throw desynchronised(header, collective);
    if (header.payload_bytes != payload) {  // the same collective: the schedules disagree
      throw RingFailure(prev(), who + " sent a frame of " + std::to_string(header.payload_bytes) +
                                    " bytes where rank " + std::to_string(rank_) + " expected " +
                                    std::to_string(payload) + " in " +
                                    to_string(collective_of(collective)));
    }
  }
  if (state.offset == kHeaderBytes + payload) {
    if (plan.on_received) plan.on_received(state.frame);
    ++state.frame;
    state.offset = 0;
  }
  return true;
}

// Sleeps until the next rank's socket takes more bytes (when a frame is ready), a frame
// arrives (here or on the receiving thread, or that thread ends), the next rank sends a
// notice, a goodbye, EOF or a reset, interrupt() is called, or `deadline` passes.
void RingLink::wait_to_send(bool sending, bool send_ready, bool receiving_here,
                            const FrameHeader& collective, Clock::time_point deadline) {
  if (sending && !next_gone_.empty()) throw RingFailure(next(), next_gone_);
  pollfd entries[4] = {
      // The next rank never sends data back: readable means a notice, a goodbye, EOF or a
      // reset. Once it is gone, nothing more is read there.
      {to_next_.get(),
       static_cast<short>((next_gone_.empty() ? POLLIN : 0) | (send_ready ? POLLOUT : 0)), 0},
      {received_event_.get(), POLLIN, 0},
      {wake_read_.get(), POLLIN, 0},
      {from_prev_.get(), static_cast<short>(receiving_here ? POLLIN : 0), 0},
  };
  const int ready = ::poll(entries, 4, milliseconds_until(deadline));
  if (ready < 0 && errno != EINTR)
    throw std::runtime_error(errno_message("poll failed in the TCP ring"));
  if (entries[2].revents != 0)
    throw std::runtime_error(
        "the TCP ring communicator was destroyed while a collective was in flight");
  if (entries[1].revents != 0) drain_event(received_event_.get());
  if (next_gone_.empty() && (entries[0].revents & (POLLIN | POLLERR | POLLHUP)))
    read_from_next(sending, send_ready ? -1 : prev());
  // Waiting for the receiving thread is bounded by its own deadline.
  if (ready == 0 && Clock::now() >= deadline && (send_ready || receiving_here)) {
    const int waited_for = send_ready ? next() : prev();
    throw timed_out(waited_for, collective);
  }
}

void RingLink::serve_receiving() {
  while (true) {
    const RingPlan* plan;
    const FrameHeader* collective;
    Clock::time_point deadline;
    {
      std::unique_lock lock(handover_mutex_);
      handover_.wait(lock, [&] { return closing_ || (receiving_plan_ && !receiver_done_.load()); });
      if (closing_) return;
      plan = receiving_plan_;
      collective = receiving_collective_;
      deadline = receiving_deadline_;
    }
    std::exception_ptr error;
    try {
      receive_frames(*plan, *collective, deadline);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard lock(handover_mutex_);
      receive_error_ = error;
      receiver_failed_.store(error != nullptr);
      receiving_plan_ = nullptr;
      receiver_done_.store(true);
    }
    handover_.notify_all();
    signal_event(received_event_.get());
  }
}

// Receives every incoming frame of `plan`, calling on_received for each, and publishes the
// count. Returns early, without error, when the sender asks it to stop.
void RingLink::receive_frames(const RingPlan& plan, const FrameHeader& collective,
                              Clock::time_point deadline) {
  RecvState recv;
  while (recv.frame < plan.in.size()) {
    const size_t before = recv.frame;
    if (try_recv(recv, plan, collective)) {
      if (recv.frame != before) {
        frames_received_.store(recv.frame, std::memory_order_release);
        signal_event(received_event_.get());
      }
      continue;
    }
    pollfd entries[3] = {
        {from_prev_.get(), POLLIN, 0},
        {stop_receiving_.get(), POLLIN, 0},
        {wake_read_.get(), POLLIN, 0},
    };
    const int ready = ::poll(entries, 3, milliseconds_until(deadline));
    if (ready < 0 && errno != EINTR)
      throw std::runtime_error(errno_message("poll failed in the TCP ring"));
    if (entries[1].revents != 0) return;
    if (entries[2].revents != 0)
      throw std::runtime_error(
          "the TCP ring communicator was destroyed while a collective was in flight");
    if (ready == 0 && Clock::now() >= deadline) {
      throw timed_out(prev(), collective);
    }
  }
}

// The next rank wrote on the channel that carries only notices and goodbyes: throw a notice;
// on a goodbye (it finished cleanly) or EOF (it exited, perhaps right after its last
// collective) note it as gone — an error only once this rank has data for it, so while this
// rank still sends it is reported at once.
void RingLink::read_from_next(bool still_sending, int waiting_for) {
  FrameHeader header{};
  bool got_header = false;
  std::string link_lost_text;
  try {
    got_header = recv_all(to_next_.get(), &header, kHeaderBytes, Clock::now() + kNoticeTimeout, "");
  } catch (const LinkLost&) {
    link_lost_text = link_lost(next()).what();
  } catch (const std::exception&) {  // EOF or a reset: reported below
  }
  if (got_header && header.kind == kAbort)
    throw_notice(to_next_.get(), next(), header.payload_bytes, header.sequence, waiting_for);
  const std::string who = "rank " + std::to_string(next());
  if (!link_lost_text.empty()) {
    next_gone_ = link_lost_text;
  } else if (got_header && header.kind == kGoodbye) {
    next_gone_ = who + " left the job (destroyed its communicator) while rank " +
                 std::to_string(rank_) +
                 " had data for it: did the ranks issue different numbers of collectives?";
  } else {
    next_gone_ = "lost " + who + ": it closed or broke its connection with rank " +
                 std::to_string(rank_) + " (the process exited or was killed)";
  }
  if (still_sending) throw RingFailure(next(), next_gone_);
}

// Reads the text of an abort notice whose header came from `from_rank` and throws it, with
// who reported it, naming the lost rank the notice names.
void RingLink::throw_notice(int fd, int from_rank, uint32_t text_bytes, uint64_t lost_rank,
                            int waiting_for) {
  std::string text(std::min<size_t>(text_bytes, kMaxNoticeBytes), '\0');
  bool complete = false;
  try {
    complete = recv_all(fd, text.data(), text.size(), Clock::now() + kNoticeTimeout, "");
  } catch (const std::exception&) {
  }
  if (!complete) text = "lost rank " + std::to_string(lost_rank);
  // A timeout that blames this rank, received while this rank itself waits for its previous
  // neighbour: the wait runs on down the chain, so the blame passes on to that neighbour.
  if (static_cast<int>(lost_rank) == rank_ && waiting_for >= 0 && waiting_for != rank_) {
    throw RingFailure(waiting_for, "timed out waiting for rank " + std::to_string(waiting_for) +
                                       ": rank " + std::to_string(rank_) +
                                       " was still waiting for it when rank " +
                                       std::to_string(from_rank) + " gave up (" + text + ")");
  }
  throw RingFailure(static_cast<int>(lost_rank), text + " (reported to rank " +
                                                     std::to_string(rank_) + " by rank " +
                                                     std::to_string(from_rank) + ")");
}

void RingLink::send_notice(int fd, const RingFailure& failure, Clock::time_point deadline) {
  const std::string text = std::string(failure.what()).substr(0, kMaxNoticeBytes);
  FrameHeader header{};
  header.kind = kAbort;
  header.payload_bytes = static_cast<uint32_t>(text.size());
  header.sequence = static_cast<uint64_t>(failure.lost_rank);
  try {
    send_all(fd, &header, kHeaderBytes, deadline, "") &&
        send_all(fd, text.data(), text.size(), deadline, "");
  } catch (const std::exception&) {
    // Best effort: that neighbour is failing too and will report its own cause.
  }
}

void RingLink::abort(const RingFailure& failure) {
  const auto deadline = Clock::now() + kNoticeTimeout;
  // Both neighbours are told, the lost one included: a rank named by a timeout is alive (it
  // may itself be waiting for another), and a dead one just refuses the bytes at once.
  if (to_next_) {
    try {
      // Complete the half-sent frame (its payload no longer matters) so the notice parses.
      bool sent = true;
      if (partial_total_ > 0 && partial_sent_ < kHeaderBytes) {
        sent = send_all(to_next_.get(), partial_header_ + partial_sent_,
                        kHeaderBytes - partial_sent_, deadline, "");
        partial_sent_ = kHeaderBytes;
      }
      const std::vector<char> filler(std::min<size_t>(partial_total_ - partial_sent_, 1 << 16));
      while (sent && partial_sent_ < partial_total_) {
        const size_t bytes = std::min(filler.size(), partial_total_ - partial_sent_);
        sent = send_all(to_next_.get(), filler.data(), bytes, deadline, "");
        partial_sent_ += bytes;
      }
      if (sent) send_notice(to_next_.get(), failure, deadline);
    } catch (const std::exception&) {
    }
  }
  // The previous rank reads this socket only for notices, so no frame is ever half-sent here.
  if (from_prev_) send_notice(from_prev_.get(), failure, deadline);
  if (to_next_) ::shutdown(to_next_.get(), SHUT_WR);
  if (from_prev_) ::shutdown(from_prev_.get(), SHUT_WR);
  partial_total_ = 0;
}

void RingLink::say_goodbye() {
  FrameHeader goodbye{};
  goodbye.kind = kGoodbye;
  const auto deadline = Clock::now() + kNoticeTimeout;
  for (Fd* socket : {&to_next_, &from_prev_}) {
    try {
      send_all(socket->get(), &goodbye, kHeaderBytes, deadline, "");
    } catch (const std::exception&) {  // that neighbour is gone already
    }
    ::shutdown(socket->get(), SHUT_WR);
  }
}

// Which of the two ranks went astray is not known here, only that they disagree, so the
// failure is this rank's own finding (lost_rank = this rank): a neighbour that reads the notice
// while it waits for its previous rank must not take it for a timeout that blames it.
RingFailure RingLink::desynchronised(const FrameHeader& theirs, const FrameHeader& ours) const {
  return RingFailure(rank_,
                     issued_differently(prev(), collective_of(theirs), rank_, collective_of(ours)));
}

RingFailure RingLink::timed_out(int waited_for, const FrameHeader& collective) const {
  return RingFailure(waited_for, "timed out waiting for rank " + std::to_string(waited_for) +
                                     ": rank " + std::to_string(rank_) + " waited " +
                                     seconds_text(timeout_) + " (the timeout) for it in " +
                                     to_string(collective_of(collective)) + "; is it stalled?");
}

RingFailure RingLink::link_lost(int rank) const {
  const std::string& address = rank == next() ? next_address_ : prev_address_;
  return RingFailure(rank,
                     link_lost_message("rank " + std::to_string(rank) + " (" + address + ")"));
}

void RingLink::interrupt() {
  char byte = 1;
  [[maybe_unused]] ssize_t written = ::write(wake_write_.get(), &byte, 1);
}

}  // namespace bareyolo::dist
