#include "wire/pcap.h"

#include <cerrno>
#include <vector>

#include "common/bytes.h"
#include "wire/packet.h"

namespace uroce::wire {
namespace {
void put32(std::FILE* f, uint32_t v) { std::fwrite(&v, 4, 1, f); }  // pcap is host order
void put16(std::FILE* f, uint16_t v) { std::fwrite(&v, 2, 1, f); }
}  // namespace

PcapWriter::~PcapWriter() { close(); }

int PcapWriter::open(const std::string& path, uint32_t snaplen) {
  close();
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) return errno;
  snaplen_ = snaplen;
  put32(file_, 0xa1b23c4d);  // nanosecond-resolution magic
  put16(file_, 2);
  put16(file_, 4);
  put32(file_, 0);
  put32(file_, 0);
  put32(file_, snaplen);
  put32(file_, 1);  // LINKTYPE_ETHERNET
  return 0;
}

void PcapWriter::close() {
  if (file_) std::fclose(file_);
  file_ = nullptr;
}

void PcapWriter::write_frame(std::span<const uint8_t> frame, uint64_t time_ns) {
  std::lock_guard lock(mutex_);
  if (!file_) return;
  const uint32_t caplen = frame.size() > snaplen_ ? snaplen_ : static_cast<uint32_t>(frame.size());
  put32(file_, static_cast<uint32_t>(time_ns / 1000000000));
  put32(file_, static_cast<uint32_t>(time_ns % 1000000000));
  put32(file_, caplen);
  put32(file_, static_cast<uint32_t>(frame.size()));
  std::fwrite(frame.data(), 1, caplen, file_);
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

}  // namespace uroce::wire
