// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// The SK_REUSEPORT program of a shared device address (link/shared_address.h): picks, for each
// datagram to UDP 4791 of the address, the socket of the process that owns it
// (steer_decision.h). A slot with no socket, a service nobody registered, or a datagram too
// short to read falls back to the kernel's hash over the group.
// bpf_helpers.h needs the types linux/bpf.h defines: keep the order.
// clang-format off
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
// clang-format on

#include "steer_decision.h"

#define UDP_HEADER_BYTES 8

struct {
  __uint(type, BPF_MAP_TYPE_REUSEPORT_SOCKARRAY);
  __uint(max_entries, UROCE_SHARE_MAX_SLOTS);
  __type(key, __u32);
  __type(value, __u64);
} uroce_slots SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, UROCE_SHARE_MAX_SERVICES);
  __type(key, __u64);
  __type(value, __u32);
} uroce_services SEC(".maps");

SEC("sk_reuseport")
int uroce_share(struct sk_reuseport_md* md) {
  unsigned char bytes[UROCE_SHARE_BTH_BYTES + UROCE_SHARE_MAD_BYTES];
  // The program sees the datagram from its UDP header on.
  if (bpf_skb_load_bytes(md, UDP_HEADER_BYTES, bytes, UROCE_SHARE_BTH_BYTES) != 0) return SK_PASS;
  struct uroce_share_steer s = uroce_share_steer_bth(bytes);
  if (s.verdict == UROCE_SHARE_READ_MAD) {
    if (bpf_skb_load_bytes(md, UDP_HEADER_BYTES + UROCE_SHARE_BTH_BYTES,
                           bytes + UROCE_SHARE_BTH_BYTES, UROCE_SHARE_MAD_BYTES) != 0)
      return SK_PASS;
    s = uroce_share_steer_mad(bytes + UROCE_SHARE_BTH_BYTES);
  }
  __u32 slot = s.slot;
  if (s.verdict == UROCE_SHARE_SERVICE) {
    __u64 service = s.service_id;
    __u32* owner = bpf_map_lookup_elem(&uroce_services, &service);
    if (!owner) return SK_PASS;
    slot = *owner;
  } else if (s.verdict != UROCE_SHARE_SLOT) {
    return SK_PASS;
  }
  // Fails (and the kernel hashes) when the slot is empty: its process is gone.
  bpf_sk_select_reuseport(md, &uroce_slots, &slot, 0);
  return SK_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
