// tests/support/link_relay/tun_device.cpp — see tun_device.h.
#include "tests/support/link_relay/tun_device.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace link_relay {

namespace {

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

void enter_namespace(const std::string& namespace_path) {
  const int ns = ::open(namespace_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns < 0)
    throw std::runtime_error(errno_text("cannot open network namespace " + namespace_path));
  const int rc = ::setns(ns, CLONE_NEWNET);
  const int setns_errno = errno;
  ::close(ns);
  errno = setns_errno;
  if (rc != 0)
    throw TunUnavailable(errno_text("cannot enter network namespace " + namespace_path +
                                    " (needs CAP_SYS_ADMIN over it)"));
}

}  // namespace

TunDevice::TunDevice(const std::string& namespace_path, const std::string& name) : name_(name) {
  if (name.empty() || name.size() >= IFNAMSIZ)
    throw std::runtime_error("TUN interface name '" + name + "' must have 1 to " +
                             std::to_string(IFNAMSIZ - 1) + " characters");
  enter_namespace(namespace_path);
  // The device's namespace is the one this thread is in when TUNSETIFF creates it.
  fd_ = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw TunUnavailable(errno_text("cannot open /dev/net/tun"));
  ifreq request{};
  std::memcpy(request.ifr_name, name.c_str(), name.size());
  request.ifr_flags = IFF_TUN | IFF_NO_PI;  // bare IP packets, no 4-byte protocol prefix
  if (::ioctl(fd_, TUNSETIFF, &request) != 0) {
    const std::string message = errno_text("cannot create TUN interface " + name +
                                           " (needs CAP_NET_ADMIN in its namespace)");
    ::close(fd_);
    throw TunUnavailable(message);
  }
}

TunDevice::~TunDevice() { ::close(fd_); }

}  // namespace link_relay
