#include "core/oob.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/bytes.h"

namespace uroce::tools {

namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

// Waits for `events` on fd until the deadline; 0, ETIMEDOUT or an errno.
int wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n > 0) return 0;
    if (n == 0) return ETIMEDOUT;
    if (errno != EINTR) return errno;
  }
}

bool parse_ipv4(const std::string& addr, sockaddr_in& sa, uint16_t port) {
  std::memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  return ::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) == 1;
}

}  // namespace

OobChannel::~OobChannel() {
  if (fd_ >= 0) ::close(fd_);
}

OobChannel& OobChannel::operator=(OobChannel&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Result<OobChannel> OobChannel::connect(const std::string& peer, uint16_t port, int timeout_ms,
                                       const std::string& bind_addr) {
  sockaddr_in to{};
  if (!parse_ipv4(peer, to, port)) return Err(EINVAL);
  sockaddr_in from{};
  if (!bind_addr.empty() && !parse_ipv4(bind_addr, from, 0)) return Err(EINVAL);
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return Err(errno);
    OobChannel ch(fd);
    if (!bind_addr.empty() && ::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0)
      return Err(errno);
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      err = wait_fd(fd, POLLOUT, deadline);
      if (err == 0) {
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err == 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return ch;
    }
    // A refused connection means the server is not listening yet; anything else is final.
    if (err != ECONNREFUSED || remaining_ms(deadline) == 0) return Err(err);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int OobChannel::send(OobType type, std::span<const uint8_t> payload, int timeout_ms) {
  if (fd_ < 0) return EBADF;
  if (payload.size() > kOobMaxPayload) return EMSGSIZE;
  std::vector<uint8_t> frame(kOobHeaderBytes + payload.size());
  store_be32(&frame[0], kOobMagic);
  store_be16(&frame[4], kOobVersion);
  store_be16(&frame[6], static_cast<uint16_t>(type));
  store_be32(&frame[8], static_cast<uint32_t>(payload.size()));
  if (!payload.empty()) std::memcpy(&frame[kOobHeaderBytes], payload.data(), payload.size());
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  size_t off = 0;
  while (off < frame.size()) {
    ssize_t n = ::send(fd_, frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (int err = wait_fd(fd_, POLLOUT, deadline)) return err;
      continue;
    }
    return n < 0 ? errno : EPIPE;
  }
  return 0;
}

namespace {
// Reads exactly buf.size() bytes before the deadline.
int read_exact(int fd, std::span<uint8_t> buf, Clock::time_point deadline) {
  size_t off = 0;
  while (off < buf.size()) {
    ssize_t n = ::recv(fd, buf.data() + off, buf.size() - off, 0);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return ECONNRESET;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return errno;
    if (int err = wait_fd(fd, POLLIN, deadline)) return err;
  }
  return 0;
}
}  // namespace

Result<OobMessage> OobChannel::recv(int timeout_ms) {
  if (fd_ < 0) return Err(EBADF);
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::array<uint8_t, kOobHeaderBytes> hdr{};
  if (int err = read_exact(fd_, hdr, deadline)) return Err(err);
  if (load_be32(&hdr[0]) != kOobMagic || load_be16(&hdr[4]) != kOobVersion) return Err(EPROTO);
  uint32_t len = load_be32(&hdr[8]);
  if (len > kOobMaxPayload) return Err(EPROTO);
  OobMessage m;
  m.type = static_cast<OobType>(load_be16(&hdr[6]));
  m.payload.resize(len);
  if (int err = read_exact(fd_, m.payload, deadline)) return Err(err);
  return m;
}

Result<OobMessage> OobChannel::expect(OobType type, int timeout_ms) {
  auto m = recv(timeout_ms);
  if (!m) return m;
  if (m->type == OobType::kError) {
    peer_error_.assign(m->payload.begin(), m->payload.end());
    return Err(ECONNABORTED);
  }
  if (m->type != type) return Err(EPROTO);
  return m;
}

OobListener::~OobListener() {
  if (fd_ >= 0) ::close(fd_);
}

Result<OobListener> OobListener::listen(const std::string& addr, uint16_t port) {
  sockaddr_in sa{};
  if (!parse_ipv4(addr, sa, port)) return Err(EINVAL);
  OobListener l;
  l.fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (l.fd_ < 0) return Err(errno);
  int one = 1;
  ::setsockopt(l.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(l.fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return Err(errno);
  if (::listen(l.fd_, 4) != 0) return Err(errno);
  socklen_t len = sizeof sa;
  ::getsockname(l.fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  l.port_ = ntohs(sa.sin_port);
  return l;
}

Result<OobChannel> OobListener::accept(int timeout_ms) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return OobChannel(fd);
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Err(errno);
    if (int err = wait_fd(fd_, POLLIN, deadline)) return Err(err);
  }
}

// ---- Payload codecs ----------------------------------------------------------------------------

std::vector<uint8_t> encode(const ConnInfo& c) {
  std::vector<uint8_t> p(kConnInfoBytes);
  store_be32(&p[0], c.qpn);
  store_be32(&p[4], c.psn);
  store_be32(&p[8], c.rkey);
  store_be64(&p[16], c.addr);
  store_be64(&p[24], c.length);
  std::memcpy(&p[32], c.gid.data(), c.gid.size());
  return p;
}

Result<ConnInfo> decode_conn_info(std::span<const uint8_t> p) {
  if (p.size() != kConnInfoBytes) return Err(EPROTO);
  ConnInfo c;
  c.qpn = load_be32(&p[0]);
  c.psn = load_be32(&p[4]);
  c.rkey = load_be32(&p[8]);
  c.addr = load_be64(&p[16]);
  c.length = load_be64(&p[24]);
  std::memcpy(c.gid.data(), &p[32], c.gid.size());
  // QPNs and PSNs are 24-bit on the wire (IBA 9.2).
  if (c.qpn > 0xffffff || c.psn > 0xffffff) return Err(EPROTO);
  return c;
}

std::vector<uint8_t> encode(const BenchParams& b) {
  // Fixed-size pieces, then appended: GCC -O3 cannot prove a vector sized at run time non-null
  // and warns (-Wnull-dereference) on stores through it.
  std::array<uint8_t, 40> p{};
  store8(&p[0], static_cast<uint8_t>(b.test));
  store8(&p[1], static_cast<uint8_t>(b.mode));
  store8(&p[2], b.verify ? 1 : 0);
  store_be32(&p[4], b.mtu);
  store_be32(&p[8], b.depth);
  store_be32(&p[12], b.seed);
  store_be64(&p[16], b.iterations);
  store_be32(&p[24], b.duration_ms);
  store_be32(&p[28], static_cast<uint32_t>(b.sizes.size()));
  store_be64(&p[32], b.buffer_bytes);
  std::vector<uint8_t> out(p.begin(), p.end());
  out.reserve(p.size() + 8 * b.sizes.size());
  for (const uint64_t size : b.sizes) {
    std::array<uint8_t, 8> s{};
    store_be64(s.data(), size);
    out.insert(out.end(), s.begin(), s.end());
  }
  return out;
}

Result<BenchParams> decode_bench_params(std::span<const uint8_t> p) {
  if (p.size() < 40) return Err(EPROTO);
  BenchParams b;
  uint8_t test = load8(&p[0]), mode = load8(&p[1]);
  if (test > static_cast<uint8_t>(BenchTest::kAtomic)) return Err(EPROTO);
  if (mode > static_cast<uint8_t>(BenchMode::kLatency)) return Err(EPROTO);
  b.test = static_cast<BenchTest>(test);
  b.mode = static_cast<BenchMode>(mode);
  b.verify = load8(&p[2]) != 0;
  b.mtu = load_be32(&p[4]);
  b.depth = load_be32(&p[8]);
  b.seed = load_be32(&p[12]);
  b.iterations = load_be64(&p[16]);
  b.duration_ms = load_be32(&p[24]);
  uint32_t n = load_be32(&p[28]);
  b.buffer_bytes = load_be64(&p[32]);
  if (n > kMaxSizesPerRun || p.size() != 40 + 8 * size_t{n}) return Err(EPROTO);
  for (uint32_t i = 0; i < n; ++i) b.sizes.push_back(load_be64(&p[40 + 8 * i]));
  if (int err = validate(b)) return Err(err);
  return b;
}

int validate(const BenchParams& p) {
  if (p.sizes.empty() || p.sizes.size() > kMaxSizesPerRun) return EINVAL;
  for (uint64_t s : p.sizes)
    if (s > kMaxBenchMessageBytes) return EINVAL;
  if (p.depth == 0 || p.depth > kMaxBenchDepth) return EINVAL;
  if (p.mtu < 256 || p.mtu > 4096 || (p.mtu & (p.mtu - 1)) != 0) return EINVAL;
  if (p.iterations == 0 || p.iterations > kMaxBenchIterations) return EINVAL;
  return 0;
}

std::vector<uint8_t> encode(const Step& s) {
  std::vector<uint8_t> p(kStepBytes);
  store_be32(&p[0], s.index);
  store_be32(&p[4], s.phase);
  store_be64(&p[8], s.bytes);
  store_be64(&p[16], s.iterations);
  return p;
}

Result<Step> decode_step(std::span<const uint8_t> p) {
  if (p.size() != kStepBytes) return Err(EPROTO);
  return Step{load_be32(&p[0]), load_be32(&p[4]), load_be64(&p[8]), load_be64(&p[16])};
}

std::vector<uint8_t> encode(const StepAck& a) {
  std::vector<uint8_t> p(kStepAckBytes);
  store_be32(&p[0], a.index);
  store_be32(&p[4], a.status);
  store_be64(&p[8], static_cast<uint64_t>(a.mismatch_at));
  return p;
}

Result<StepAck> decode_step_ack(std::span<const uint8_t> p) {
  if (p.size() != kStepAckBytes) return Err(EPROTO);
  return StepAck{load_be32(&p[0]), load_be32(&p[4]), static_cast<int64_t>(load_be64(&p[8]))};
}

}  // namespace uroce::tools
