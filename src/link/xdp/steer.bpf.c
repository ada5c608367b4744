// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// The XDP program of the AF_XDP link (link/xdp_link.h): hands RoCE frames to the AF_XDP socket
// bound to the receiving queue, and everything else to the kernel. RoCE is EtherType 0x8915
// (RoCE v1) or IPv4/IPv6 UDP to port 4791 (RoCEv2), behind at most one 802.1Q tag; an IPv4
// fragment is not (RoCE never fragments) and goes to the kernel. A queue with no socket in the
// map also passes the frame on (bpf_redirect_map's fallback), so the kernel's stack keeps working
// while the link is not bound.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define ROCE_V1_ETHERTYPE 0x8915
#define ROCE_V2_PORT 4791
#define VLAN_ETHERTYPE 0x8100
#define MAX_QUEUES 64

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, MAX_QUEUES);
  __type(key, __u32);
  __type(value, __u32);
} uroce_xsks SEC(".maps");

struct vlan_tag {
  __be16 tci;
  __be16 ethertype;
};

SEC("xdp")
int uroce_steer(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* end = (void*)(long)ctx->data_end;
  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > end) return XDP_PASS;
  __u16 type = bpf_ntohs(eth->h_proto);
  void* l3 = eth + 1;
  if (type == VLAN_ETHERTYPE) {
    struct vlan_tag* tag = l3;
    if ((void*)(tag + 1) > end) return XDP_PASS;
    type = bpf_ntohs(tag->ethertype);
    l3 = tag + 1;
  }
  struct udphdr* udp;
  if (type == ROCE_V1_ETHERTYPE) {
    return bpf_redirect_map(&uroce_xsks, ctx->rx_queue_index, XDP_PASS);
  } else if (type == ETH_P_IP) {
    struct iphdr* ip = l3;
    if ((void*)(ip + 1) > end || ip->protocol != IPPROTO_UDP || ip->ihl < 5) return XDP_PASS;
    if (ip->frag_off & bpf_htons(0x3fff)) return XDP_PASS;  // MF or an offset: a fragment
    udp = (void*)ip + ip->ihl * 4;
  } else if (type == ETH_P_IPV6) {
    struct ipv6hdr* ip6 = l3;
    if ((void*)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_UDP) return XDP_PASS;
    udp = (void*)(ip6 + 1);
  } else {
    return XDP_PASS;
  }
  if ((void*)(udp + 1) > end || udp->dest != bpf_htons(ROCE_V2_PORT)) return XDP_PASS;
  return bpf_redirect_map(&uroce_xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
