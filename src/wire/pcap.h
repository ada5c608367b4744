#pragma once
// pcap writer (LINKTYPE_ETHERNET), so any tool can dump what it sends and receives and Wireshark
// reads it. Frames that are bare IP packets are wrapped in a synthetic Ethernet header.
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <span>
#include <string>

namespace uroce::wire {

class PcapWriter {
 public:
  PcapWriter() = default;
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  // Returns 0 or an errno.
  int open(const std::string& path, uint32_t snaplen = 65535);
  bool is_open() const { return file_ != nullptr; }
  void close();
  // Thread-safe: several links may share one capture.
  void write_frame(std::span<const uint8_t> frame, uint64_t time_ns);
  // Wraps an IPv4/IPv6 packet in an Ethernet header (zero MACs) first.
  void write_ip_packet(std::span<const uint8_t> ip_packet, uint64_t time_ns);
  // Records that could not be written (disk full, ...): counted, never fatal.
  uint64_t write_errors() const;

 private:
  void close_locked();

  std::FILE* file_ = nullptr;
  uint32_t snaplen_ = 65535;
  uint64_t write_errors_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace uroce::wire
