// tests/support/link_relay/tun_device.h — a TUN interface (layer 3: whole IP packets, no
// link-layer header) created inside a given network namespace, for the link relay.
#pragma once

#include <stdexcept>
#include <string>

namespace link_relay {

// Thrown when this machine will not make a TUN device (no /dev/net/tun, or no CAP_NET_ADMIN in
// the namespace): the test that needs one reports itself skipped.
class TunUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An open TUN interface: read() takes one IP packet the namespace's kernel routed into it,
// write() hands one packet to that kernel as if it had arrived on the wire. The interface
// exists while this object does; the caller gives it addresses and brings it up (`ip`).
class TunDevice {
 public:
  // Enters the network namespace at `namespace_path` (/proc/PID/ns/net) — this thread stays
  // there — and creates interface `name` in it, non-blocking.
  TunDevice(const std::string& namespace_path, const std::string& name);
  ~TunDevice();
  TunDevice(const TunDevice&) = delete;
  TunDevice& operator=(const TunDevice&) = delete;

  int fd() const { return fd_; }
  const std::string& name() const { return name_; }

 private:
  int fd_ = -1;
  std::string name_;
};

}  // namespace link_relay
