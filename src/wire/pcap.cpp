#include "wire/pcap.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "wire/packet.h"

namespace uroce::wire {
namespace {
// pcap fields are in the writer's byte order; readers tell it from the magic number.
void put32(uint8_t* p, uint32_t v) {
  std::memcpy(p, &v, 4);
}
void put16(uint8_t* p, uint16_t v) {
  std::memcpy(p, &v, 2);
}
}  // namespace

PcapWriter::~PcapWriter() {
  close();
}

int PcapWriter::open(const std::string& path, uint32_t snaplen) {
  std::lock_guard lock(mutex_);
  close_locked();
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) return errno;
  snaplen_ = snaplen;
  std::array<uint8_t, 24> h{};
  put32(&h[0], 0xa1b23c4d);  // nanosecond-resolution magic
  put16(&h[4], 2);           // format version 2.4
  put16(&h[6], 4);
  put32(&h[16], snaplen);
  put32(&h[20], 1);  // LINKTYPE_ETHERNET
  if (std::fwrite(h.data(), 1, h.size(), file_) != h.size()) {
    const int err = errno ? errno : EIO;
    close_locked();
    return err;
  }
  return 0;
}

void PcapWriter::close() {
  std::lock_guard lock(mutex_);
  close_locked();
}

void PcapWriter::close_locked() {
  if (file_ && std::fclose(file_) != 0) ++write_errors_;
  file_ = nullptr;
}

void PcapWriter::write_frame(std::span<const uint8_t> frame, uint64_t time_ns) {
  std::lock_guard lock(mutex_);
  if (!file_) return;
  const uint32_t caplen = frame.size() > snaplen_ ? snaplen_ : static_cast<uint32_t>(frame.size());
  std::array<uint8_t, 16> rec;
  put32(&rec[0], static_cast<uint32_t>(time_ns / 1000000000));
  put32(&rec[4], static_cast<uint32_t>(time_ns % 1000000000));
  put32(&rec[8], caplen);
  put32(&rec[12], static_cast<uint32_t>(frame.size()));
  // A failed write is counted, not fatal: a capture is a debugging aid and must never stop the
  // data path it watches.
  if (std::fwrite(rec.data(), 1, rec.size(), file_) != rec.size() ||
      std::fwrite(frame.data(), 1, caplen, file_) != caplen)
    ++write_errors_;
}

void PcapWriter::write_ip_packet(std::span<const uint8_t> ip, uint64_t time_ns) {
  if (ip.empty()) return;
  std::vector<uint8_t> frame(kEthBytes + ip.size());
  Ethernet eth;
  eth.ethertype = (ip[0] >> 4) == 6 ? kEthertypeIpv6 : kEthertypeIpv4;
  write_ethernet(eth, frame);
  std::copy(ip.begin(), ip.end(), frame.begin() + kEthBytes);
  write_frame(frame, time_ns);
}

uint64_t PcapWriter::write_errors() const {
  std::lock_guard lock(mutex_);
  return write_errors_;
}

}  // namespace uroce::wire
