// udp_ceiling: what UDP itself can do on this machine, the ceiling for uroce over UDP.
//
// A minimal sender and receiver of equal-size datagrams, in two threads of one process, each
// bound to its own address, with the same batching choices the link has:
//   single  one datagram per sendto/recvfrom
//   mmsg    sendmmsg/recvmmsg, 64 datagrams per call
//   gso     UDP_SEGMENT sends of up to 64 segments, UDP_GRO receives
//   gso-zerocopy  gso with MSG_ZEROCOPY sends (SO_ZEROCOPY; the completions read from the error
//           queue, and the count of sends the kernel copied after all reported on stderr)
//   link-*  the same traffic through uroce's UdpLink (RC WRITE MIDDLE packets of the same
//           datagram size, ICRC built and checked), with the same choice of batching;
//           link-gso-gather is link-gso with the kernel gathering each packet's pieces from an
//           iovec each instead of the link copying them into one buffer per send
// and a ping-pong for latency (busy-polling non-blocking receives, yielding the CPU between
// empty polls so two spinning threads on a small machine do not starve each other), raw or
// through the link.
// Throughput is what the receiver got (datagrams lost to a full receive buffer do not count).
//
// Usage: udp_ceiling [--mode M] [--size BYTES] [--seconds S] [--a ADDR] [--b ADDR]
//   M: single | mmsg | gso | gso-zerocopy | link-single | link-mmsg | link-gso |
//      link-gso-gather | pingpong | link-pingpong
// Prints one line: "udp_ceiling mode=... size=... gbps=... mpps=..." (ping-pongs: "half_rtt_us=...
// half_rtt_median_us=... half_rtt_p99_us=...", the mean, median and 99th percentile).
#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/stats.h"
#include "link/udp_link.h"
#include "wire/packet.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint16_t kPort = 4791;
constexpr int kBatch = 64;
// A ping-pong keeps each round's time for its percentiles: the bound on that record (a few
// microseconds a round fills it in well over ten seconds).
constexpr size_t kMaxRounds = 8u << 20;

struct Args {
  std::string mode = "gso";
  size_t size = 4150;
  double seconds = 2.0;
  std::string a = "127.0.0.1", b = "127.0.0.2";
};

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

sockaddr_in addr_of(const std::string& ip, uint16_t port) {
  sockaddr_in s{};
  s.sin_family = AF_INET;
  s.sin_port = htons(port);
  if (inet_pton(AF_INET, ip.c_str(), &s.sin_addr) != 1) die("address");
  return s;
}

int udp_socket(const std::string& ip, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) die("socket");
  const int buf = 8 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  const sockaddr_in s = addr_of(ip, port);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&s), sizeof s) != 0) die("bind");
  return fd;
}

double elapsed_s(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Gb/s counts UDP payload bytes (the whole RoCE packet from the BTH to the ICRC for the link).
void report(const Args& a, uint64_t datagrams, double secs, size_t datagram_bytes) {
  std::printf("udp_ceiling mode=%s size=%zu gbps=%.2f mpps=%.3f datagrams=%llu\n", a.mode.c_str(),
              datagram_bytes, static_cast<double>(datagrams * datagram_bytes) * 8 / secs / 1e9,
              static_cast<double>(datagrams) / secs / 1e6,
              static_cast<unsigned long long>(datagrams));
}

// A ping-pong's report: the mean half round trip (the run's time over its rounds, lost rounds
// included) and, from each round's own round trip, the median and the 99th percentile, the figures
// a latency tail is judged by.
void report_pingpong(const Args& a, double secs, std::vector<double>& rtt_us) {
  const uint64_t rounds = rtt_us.size();
  // The percentiles as `uroce bench` takes them (core/stats.h), so that the two compare.
  std::sort(rtt_us.begin(), rtt_us.end());
  const double median = uroce::tools::percentile_sorted(rtt_us, 0.5) / 2;
  const double p99 = uroce::tools::percentile_sorted(rtt_us, 0.99) / 2;
  std::printf(
      "udp_ceiling mode=%s size=%zu half_rtt_us=%.2f half_rtt_median_us=%.2f "
      "half_rtt_p99_us=%.2f rounds=%llu\n",
      a.mode.c_str(), a.size, rounds ? secs / static_cast<double>(rounds) / 2 * 1e6 : 0.0, median,
      p99, static_cast<unsigned long long>(rounds));
}

// ---- Raw UDP -------------------------------------------------------------------------------

// The raw modes that send UDP_SEGMENT and receive UDP_GRO.
bool raw_gso(const Args& a) {
  return a.mode == "gso" || a.mode == "gso-zerocopy";
}

// MSG_ZEROCOPY completions: each notification on the error queue covers a range of sends, and
// says whether the kernel copied the data after all (SO_EE_CODE_ZEROCOPY_COPIED: on loopback and
// other local delivery it must, docs/performance.md).
struct ZerocopyCompletions {
  uint64_t sends = 0, copied = 0;
  void drain(int fd) {
    for (;;) {
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(sock_extended_err)) + 64];
      msghdr m{};
      m.msg_control = control;
      m.msg_controllen = sizeof control;
      if (::recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return;
      for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_IP || c->cmsg_type != IP_RECVERR) continue;
        sock_extended_err e;
        std::memcpy(&e, CMSG_DATA(c), sizeof e);
        if (e.ee_origin != SO_EE_ORIGIN_ZEROCOPY) continue;
        const uint64_t n = uint64_t{e.ee_data} - e.ee_info + 1;  // sends ee_info..ee_data
        sends += n;
        if (e.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) copied += n;
      }
    }
  }
};

void raw_sender(const Args& a, std::atomic<bool>& stop) {
  const int fd = udp_socket(a.a, 0);
  const sockaddr_in to = addr_of(a.b, kPort);
  std::vector<uint8_t> data(a.size * kBatch, 0x5a);
  std::vector<mmsghdr> msgs(kBatch);
  std::vector<iovec> iov(kBatch);
  for (int i = 0; i < kBatch; ++i) {
    iov[i] = {data.data() + i * a.size, a.size};
    msgs[i].msg_hdr.msg_name = const_cast<sockaddr_in*>(&to);
    msgs[i].msg_hdr.msg_namelen = sizeof to;
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  // GSO: one send carries as many segments as fit in 64 KiB (at most kBatch).
  const size_t segs = std::min<size_t>(kBatch, 65000 / a.size);
  iovec gso_iov{data.data(), segs * a.size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(uint16_t))] = {};
  msghdr gso{};
  gso.msg_name = const_cast<sockaddr_in*>(&to);
  gso.msg_namelen = sizeof to;
  gso.msg_iov = &gso_iov;
  gso.msg_iovlen = 1;
  gso.msg_control = control;
  gso.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&gso);
  c->cmsg_level = IPPROTO_UDP;
  c->cmsg_type = UDP_SEGMENT;
  c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
  const uint16_t gso_size = static_cast<uint16_t>(a.size);
  std::memcpy(CMSG_DATA(c), &gso_size, sizeof gso_size);
  const bool zerocopy = a.mode == "gso-zerocopy";
  if (zerocopy) {
    const int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) != 0) die("SO_ZEROCOPY");
  }
  ZerocopyCompletions done;
  while (!stop.load(std::memory_order_relaxed)) {
    if (a.mode == "single") {
      ::sendto(fd, data.data(), a.size, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
    } else if (a.mode == "mmsg") {
      ::sendmmsg(fd, msgs.data(), kBatch, 0);
    } else if (!zerocopy) {
      if (::sendmsg(fd, &gso, 0) < 0) die("sendmsg with UDP_SEGMENT");
    } else {
      // The payload never changes, so a buffer still pinned by the kernel may be sent again; a
      // real sender would have to wait for its completion first. ENOBUFS: the completions are
      // behind (the socket's option memory is full), read them and send again.
      while (::sendmsg(fd, &gso, MSG_ZEROCOPY) < 0) {
        if (errno != ENOBUFS) die("sendmsg with MSG_ZEROCOPY");
        done.drain(fd);
      }
      done.drain(fd);
    }
  }
  if (zerocopy) {
    done.drain(fd);
    std::fprintf(stderr, "udp_ceiling: %llu zerocopy sends completed, %llu of them copied\n",
                 static_cast<unsigned long long>(done.sends),
                 static_cast<unsigned long long>(done.copied));
  }
  ::close(fd);
}

uint64_t raw_receiver(const Args& a, int fd, std::atomic<bool>& stop, double& secs) {
  const bool gro = raw_gso(a);
  const size_t buf_bytes = gro ? 65536 : a.size;
  std::vector<uint8_t> bufs(buf_bytes * kBatch);
  std::vector<mmsghdr> msgs(kBatch);
  std::vector<iovec> iov(kBatch);
  std::vector<std::array<char, 64>> controls(kBatch);
  uint64_t datagrams = 0;
  Clock::time_point t0{};
  Clock::time_point last{};
  while (!stop.load(std::memory_order_relaxed)) {
    for (int i = 0; i < kBatch; ++i) {
      iov[i] = {bufs.data() + i * buf_bytes, buf_bytes};
      msgs[i].msg_hdr = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_control = controls[i].data();
      msgs[i].msg_hdr.msg_controllen = controls[i].size();
    }
    int n;
    if (a.mode == "single") {
      n = ::recv(fd, bufs.data(), buf_bytes, MSG_DONTWAIT) >= 0 ? 1 : -1;
      msgs[0].msg_len = static_cast<unsigned>(a.size);
    } else {
      n = ::recvmmsg(fd, msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
    }
    if (n <= 0) {
      pollfd pfd{fd, POLLIN, 0};
      ::poll(&pfd, 1, 10);
      continue;
    }
    if (datagrams == 0) t0 = Clock::now();
    for (int i = 0; i < n; ++i) datagrams += (msgs[i].msg_len + a.size - 1) / a.size;
    last = Clock::now();
  }
  secs = std::chrono::duration<double>(last - t0).count();
  return datagrams;
}

void raw_throughput(const Args& a) {
  const int fd = udp_socket(a.b, kPort);
  if (raw_gso(a)) {
    const int one = 1;
    if (setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof one) != 0) die("UDP_GRO");
  }
  std::atomic<bool> stop{false};
  double secs = 0;
  uint64_t got = 0;
  std::thread rx([&] { got = raw_receiver(a, fd, stop, secs); });
  std::thread tx([&] { raw_sender(a, stop); });
  std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));
  stop = true;
  tx.join();
  rx.join();
  ::close(fd);
  report(a, got, secs, a.size);
}

void raw_pingpong(const Args& a) {
  const int fa = udp_socket(a.a, kPort), fb = udp_socket(a.b, kPort);
  const sockaddr_in to_a = addr_of(a.a, kPort), to_b = addr_of(a.b, kPort);
  std::vector<uint8_t> buf(a.size, 1);
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    std::vector<uint8_t> in(a.size + 64);
    while (!stop.load(std::memory_order_relaxed)) {
      const ssize_t n = ::recv(fb, in.data(), in.size(), MSG_DONTWAIT);
      if (n > 0)
        ::sendto(fb, in.data(), static_cast<size_t>(n), 0, reinterpret_cast<const sockaddr*>(&to_a),
                 sizeof to_a);
      else
        sched_yield();  // on a busy 2-core machine, let the peer run instead of spinning it out
    }
  });
  std::vector<double> rtt_us;
  rtt_us.reserve(kMaxRounds);
  const auto t0 = Clock::now();
  std::vector<uint8_t> in(a.size + 64);
  while (elapsed_s(t0) < a.seconds && rtt_us.size() < kMaxRounds) {
    const auto sent = Clock::now();
    ::sendto(fa, buf.data(), a.size, 0, reinterpret_cast<const sockaddr*>(&to_b), sizeof to_b);
    while (::recv(fa, in.data(), in.size(), MSG_DONTWAIT) < 0) {
      if (elapsed_s(sent) > 1.0) break;  // lost: bounded wait, counts as a (slow) round
      sched_yield();
    }
    rtt_us.push_back(elapsed_s(sent) * 1e6);
  }
  const double secs = elapsed_s(t0);
  stop = true;
  echo.join();
  report_pingpong(a, secs, rtt_us);
  ::close(fa);
  ::close(fb);
}

// ---- Through UdpLink -----------------------------------------------------------------------

std::unique_ptr<uroce::link::UdpLink> open_link(const std::string& ip, const std::string& mode) {
  uroce::link::UdpLinkOptions o;
  o.address = ip;
  o.mmsg = mode != "link-single";
  o.gso = o.gro = mode == "link-gso" || mode == "link-gso-gather" || mode == "link-pingpong";
  o.linearize = mode != "link-gso-gather";
  auto r = uroce::link::UdpLink::open(o);
  if (!r.ok()) {
    errno = r.error();
    die(("UdpLink " + ip).c_str());
  }
  return std::move(*r);
}

// An RC WRITE MIDDLE packet whose datagram (BTH, payload, ICRC) is `size` bytes.
struct LinkPacket {
  std::vector<uint8_t> payload;
  uroce::wire::AddressVector av;
  uroce::wire::TxPacket tx;
  LinkPacket(size_t size, const uroce::Gid& to) {
    using namespace uroce::wire;
    // A multiple of 4, so no pad: the datagram is `size` rounded down to a multiple of 4.
    const size_t body = size > kBthBytes + kIcrcBytes ? (size - kBthBytes - kIcrcBytes) & ~3ul : 0;
    payload.assign(body, 0x5a);
    TransportHeaders h;
    h.bth.opcode = op::kRcWriteMiddle;
    h.bth.pad_count = pad_for(static_cast<uint32_t>(body));
    tx.header_len = write_transport_headers(h, tx.header);
    tx.payload[0] = payload;
    tx.payload_parts = 1;
    tx.payload_len = static_cast<uint32_t>(body);
    tx.pad = h.bth.pad_count;
    av.dgid = to;
    tx.dest = &av;
  }
  size_t datagram_bytes() const { return tx.header_len + tx.payload_len + tx.pad + 4; }
};

void link_throughput(const Args& a) {
  auto rx_link = open_link(a.b, a.mode);
  std::atomic<bool> stop{false};
  uint64_t got = 0;
  double secs = 0;
  std::thread rx([&] {
    Clock::time_point t0{}, last{};
    const uroce::link::RxHandler count = [&](const uroce::wire::RxPacket&) { ++got; };
    while (!stop.load(std::memory_order_relaxed)) {
      const uint64_t before = got;
      if (rx_link->poll(count, 256) == 0) {
        pollfd pfd{rx_link->wait_fd(), POLLIN, 0};
        ::poll(&pfd, 1, 10);
        continue;
      }
      if (before == 0 && got > 0) t0 = Clock::now();
      last = Clock::now();
    }
    secs = std::chrono::duration<double>(last - t0).count();
  });
  std::thread tx([&] {
    auto tx_link = open_link(a.a, a.mode);
    LinkPacket p(a.size, rx_link->local_gid());
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < kBatch; ++i) tx_link->transmit(p.tx);
      tx_link->flush();
    }
  });
  std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));
  stop = true;
  tx.join();
  rx.join();
  const auto& c = rx_link->counters();
  if (c.rx_drop_bad_icrc + c.rx_drop_malformed != 0) std::fprintf(stderr, "link drops!\n");
  const LinkPacket p(a.size, rx_link->local_gid());
  report(a, got, secs, p.datagram_bytes());
}

void link_pingpong(const Args& a) {
  auto la = open_link(a.a, a.mode), lb = open_link(a.b, a.mode);
  LinkPacket to_b(a.size, lb->local_gid()), to_a(a.size, la->local_gid());
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    const uroce::link::RxHandler reply = [&](const uroce::wire::RxPacket&) {
      lb->transmit(to_a.tx);
      lb->flush();
    };
    while (!stop.load(std::memory_order_relaxed))
      if (lb->poll(reply, 16) == 0) sched_yield();
  });
  std::vector<double> rtt_us;
  rtt_us.reserve(kMaxRounds);
  bool back = false;
  const uroce::link::RxHandler got = [&](const uroce::wire::RxPacket&) { back = true; };
  const auto t0 = Clock::now();
  while (elapsed_s(t0) < a.seconds && rtt_us.size() < kMaxRounds) {
    back = false;
    const auto sent = Clock::now();
    la->transmit(to_b.tx);
    la->flush();
    while (!back && elapsed_s(sent) < 1.0)
      if (la->poll(got, 16) == 0) sched_yield();
    rtt_us.push_back(elapsed_s(sent) * 1e6);
  }
  const double secs = elapsed_s(t0);
  stop = true;
  echo.join();
  report_pingpong(a, secs, rtt_us);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--mode") {
      a.mode = v;
    } else if (k == "--size") {
      a.size = std::stoul(v);
    } else if (k == "--seconds") {
      a.seconds = std::stod(v);
    } else if (k == "--a") {
      a.a = v;
    } else if (k == "--b") {
      a.b = v;
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (a.size == 0 || a.size > 65000) {
    std::fprintf(stderr, "--size must be 1..65000\n");
    return 2;
  }
  if (a.mode == "single" || a.mode == "mmsg" || raw_gso(a)) {
    raw_throughput(a);
  } else if (a.mode == "pingpong") {
    raw_pingpong(a);
  } else if (a.mode == "link-single" || a.mode == "link-mmsg" || a.mode == "link-gso" ||
             a.mode == "link-gso-gather") {
    link_throughput(a);
  } else if (a.mode == "link-pingpong") {
    link_pingpong(a);
  } else {
    std::fprintf(stderr, "unknown mode %s\n", a.mode.c_str());
    return 2;
  }
  return 0;
}
