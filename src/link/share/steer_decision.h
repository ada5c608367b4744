/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Which process of those sharing one device address a RoCEv2 datagram belongs to
 * (link/shared_address.h, docs/udp-link.md "One address, several processes"). Plain C without
 * library calls: the SK_REUSEPORT program (share/share.bpf.c) runs it in the kernel for every
 * datagram to the shared port, and the unit tests run the same code (tests/unit/
 * link_share_steer_test.cpp).
 *
 * Each sharing process owns one slot. Its QPNs carry the slot in their top bits, and so do the
 * CM communication IDs (and SIDR request IDs) it hands out, so every packet but a REQ or a
 * SIDR_REQ names its owner: a data packet by its destination QPN, a CM reply by the remote
 * communication ID it carries (the receiver's own local ID). A REQ or SIDR_REQ names a service
 * ID, which the listening process registered. What names no owner goes to any member. */
#ifndef UROCE_LINK_SHARE_STEER_DECISION_H
#define UROCE_LINK_SHARE_STEER_DECISION_H

#define UROCE_SHARE_SLOT_BITS 4
#define UROCE_SHARE_MAX_SLOTS (1u << UROCE_SHARE_SLOT_BITS)
/* Services (listening ports, all port spaces) registered at one shared address. */
#define UROCE_SHARE_MAX_SERVICES 256
#define UROCE_SHARE_QPN_SHIFT (24 - UROCE_SHARE_SLOT_BITS)
#define UROCE_SHARE_COMM_ID_SHIFT (32 - UROCE_SHARE_SLOT_BITS)

/* What the decision reads: the BTH (12 bytes) of every datagram, then for a datagram to QPN 1
 * the DETH (8), the MAD header (24) and the first 16 bytes of the CM message. */
#define UROCE_SHARE_BTH_BYTES 12
#define UROCE_SHARE_MAD_BYTES (8 + 24 + 16)

enum uroce_share_verdict {
  UROCE_SHARE_ANY = 0,     /* no owner named: any member takes it */
  UROCE_SHARE_SLOT = 1,    /* the member in `slot` */
  UROCE_SHARE_SERVICE = 2, /* the member that registered `service_id` */
  UROCE_SHARE_READ_MAD = 3 /* to QPN 1: decide again from the MAD bytes */
};

struct uroce_share_steer {
  unsigned int verdict;
  unsigned int slot;
  unsigned long long service_id;
};

static inline unsigned int uroce_share_be32(const unsigned char* p) {
  return (unsigned int)p[0] << 24 | (unsigned int)p[1] << 16 | (unsigned int)p[2] << 8 |
         (unsigned int)p[3];
}

/* From the BTH alone: the destination QPN's slot, or READ_MAD for the GSI QP. */
static inline struct uroce_share_steer uroce_share_steer_bth(const unsigned char* bth) {
  struct uroce_share_steer s = {UROCE_SHARE_ANY, 0, 0};
  const unsigned int qpn = (unsigned int)bth[5] << 16 | (unsigned int)bth[6] << 8 | bth[7];
  if (qpn == 1) {
    s.verdict = UROCE_SHARE_READ_MAD;
  } else if (qpn != 0xffffff) { /* 0xffffff: multicast, read by every member's group socket */
    s.verdict = UROCE_SHARE_SLOT;
    s.slot = qpn >> UROCE_SHARE_QPN_SHIFT;
  }
  return s;
}

/* From the bytes after the BTH of a datagram to QPN 1 (UROCE_SHARE_MAD_BYTES of them). */
static inline struct uroce_share_steer uroce_share_steer_mad(const unsigned char* deth) {
  struct uroce_share_steer s = {UROCE_SHARE_ANY, 0, 0};
  const unsigned char* mad = deth + 8;
  const unsigned char* msg = mad + 24;
  if (mad[0] != 1 || mad[1] != 0x07) return s; /* base version 1, class CM */
  const unsigned int attribute = (unsigned int)mad[16] << 8 | mad[17];
  unsigned int ours = 0;
  switch (attribute) {
    case 0x10: /* REQ: service ID at 8 */
    case 0x17: /* SIDR_REQ: service ID at 8 */
      s.verdict = UROCE_SHARE_SERVICE;
      s.service_id =
          (unsigned long long)uroce_share_be32(msg + 8) << 32 | uroce_share_be32(msg + 12);
      return s;
    case 0x18: /* SIDR_REP: our request ID at 0 */
      ours = uroce_share_be32(msg);
      break;
    case 0x11: /* MRA */
    case 0x12: /* REJ */
    case 0x13: /* REP */
    case 0x14: /* RTU */
    case 0x15: /* DREQ */
    case 0x16: /* DREP */
    case 0x19: /* LAP */
    case 0x1a: /* APR: each carries our communication ID as its remote one, at 4 */
      ours = uroce_share_be32(msg + 4);
      break;
    default:
      return s;
  }
  if (ours != 0) { /* 0: the sender knew no ID of ours (a timed-out REQ's REJ) */
    s.verdict = UROCE_SHARE_SLOT;
    s.slot = ours >> UROCE_SHARE_COMM_ID_SHIFT;
  }
  return s;
}

#endif
