#!/usr/bin/python3
"""Generates tests/vectors/roce_scapy.txt (RoCEv2) and roce_v1_scapy.txt (RoCE v1): packets built
by scapy, with their fields; and checks frames uroce built against scapy (--check-v1).

The C++ test tests/unit/wire_vectors_test.cpp reads the file and checks both ways: uroce parses
scapy's bytes into the listed fields (ICRC included), and uroce builds the same bytes from those
fields, apart from the UDP checksum, which scapy fills in and RoCEv2 masks (uroce sends 0).

scapy.contrib.roce has the BTH, AETH and CNP layers and computes the ICRC for IPv4 only. The other
extension headers are declared here from IBA 9.3 (sizes and field widths), and the IPv6 ICRC is
computed here by the annex A17 recipe. That code is checked first against scapy's own IPv4 ICRC on
every IPv4 vector, so a mistake in it cannot pass silently.

RoCE v1 (EtherType 0x8915, GRH, BTH): scapy has the GRH and BTH layers but no v1 ICRC (its BTH
computes one only over UDP/IPv4), so icrc_v1() below computes it from IBA 7.8.1 and annex A16: a
CRC-32 over 8 bytes of ones standing in for the LRH, the GRH with its traffic class, flow label and
hop limit set to ones, and the BTH with its reserved byte (byte 4) set to ones, then the rest of
the packet. It is checked first against a v1 packet whose bytes were laid out by hand
(tests/unit/wire_v1_test.cpp's kSendOnlyV1). --check-v1 FILE reads frames in the v1 vector format
(tests/e2e/wire_scapy_v1_test.cpp writes the ones uroce's codec built), dissects each with scapy,
compares every field and the ICRC, rebuilds it in scapy from the fields and compares the bytes.

Needs Debian's python3-scapy, so run it with /usr/bin/python3:
    /usr/bin/python3 scripts/gen-wire-vectors.py > tests/vectors/roce_scapy.txt
    /usr/bin/python3 scripts/gen-wire-vectors.py --v1 > tests/vectors/roce_v1_scapy.txt
The output is deterministic; rerunning it must leave the files unchanged.
"""

import sys
import zlib

from scapy.compat import raw
from scapy.config import conf
from scapy.contrib.roce import AETH, BTH, GRH, CNPPadding
from scapy.fields import BitField, IntField, XIntField, XLongField
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Packet, Raw

conf.verb = 0


class RETH(Packet):
    name = "RETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), IntField("dlen", 0)]


class AtomicETH(Packet):
    name = "AtomicETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), XLongField("swap", 0),
                   XLongField("comp", 0)]


class AtomicAckETH(Packet):
    name = "AtomicAckETH"
    fields_desc = [XLongField("orig", 0)]


class ImmDt(Packet):
    name = "ImmDt"
    fields_desc = [XIntField("imm", 0)]


class IETH(Packet):
    name = "IETH"
    fields_desc = [XIntField("rkey", 0)]


class DETH(Packet):
    name = "DETH"
    fields_desc = [XIntField("qkey", 0), BitField("resv", 0, 8), BitField("srcqp", 0, 24)]


class XRCETH(Packet):
    name = "XRCETH"
    fields_desc = [BitField("resv", 0, 8), BitField("srqn", 0, 24)]


V4_SRC, V4_DST = "198.18.0.1", "198.18.0.2"
V6_SRC, V6_DST = "fd00:0:0:1::1", "fd00:0:0:2::2"


def icrc(ip_pkt_bytes):
    """ICRC of an IP packet (IP header .. pad, no ICRC), masked as IBA annex A17 says."""
    b = bytearray(ip_pkt_bytes)
    if b[0] >> 4 == 6:
        b[0] |= 0x0F  # traffic class and flow label
        b[1] = b[2] = b[3] = 0xFF
        b[7] = 0xFF  # hop limit
        ip_len = 40
    else:
        b[1] = 0xFF  # TOS
        b[8] = 0xFF  # TTL
        b[10] = b[11] = 0xFF  # header checksum
        ip_len = 20
    b[ip_len + 6] = b[ip_len + 7] = 0xFF  # UDP checksum
    b[ip_len + 8 + 4] = 0xFF  # BTH reserved byte with FECN and BECN
    return zlib.crc32(b"\xff" * 8 + bytes(b)) & 0xFFFFFFFF


def with_icrc(ip_pkt):
    """Bytes of an IP packet with the ICRC computed here rather than by scapy."""
    pkt = ip_pkt.copy()
    pkt[BTH].icrc = 0
    value = icrc(raw(pkt)[:-4])
    # scapy writes the field big-endian; the wire carries the ICRC least significant byte first.
    # Setting it before the final build keeps the UDP checksum scapy fills in right.
    pkt[BTH].icrc = int.from_bytes(value.to_bytes(4, "little"), "big")
    return raw(pkt)


def make(name, opcode, exts, payload=b"", v6=False, dscp=0, ecn=2, flow=0, sport=0xC000,
         eth=None, **bth):
    """Builds one vector. `exts` is a list of extension header packets in wire order."""
    pad = (4 - len(payload) % 4) % 4
    bth_fields = dict(opcode=opcode, padcount=pad, migreq=1, pkey=0xFFFF)
    bth_fields.update(bth)
    tos = dscp << 2 | ecn
    if v6:
        ip = IPv6(src=V6_SRC, dst=V6_DST, tc=tos, fl=flow, hlim=64)
    else:
        ip = IP(src=V4_SRC, dst=V4_DST, tos=tos, ttl=64, id=0, flags="DF")
    ip = ip / UDP(sport=sport, dport=4791)
    b = BTH(**bth_fields)
    for e in exts:
        b = b / e
    b = b / Raw(payload + b"\x00" * pad)
    pkt = ip / b
    if v6:
        data = with_icrc(pkt)
    else:
        data = raw(pkt)  # scapy computes the IPv4 ICRC itself
        assert with_icrc(pkt) == data, f"{name}: icrc() here disagrees with scapy on IPv4"
    vec = dict(name=name, layer="ip", ipv6=int(v6), dscp=dscp, ecn=ecn, flow=flow, sport=sport)
    if eth is not None:
        data = raw(ether_for(eth, 0x86DD if v6 else 0x0800)) + data
        vec.update(eth_fields_of(eth, "eth"))
    return finish_vector(vec, pkt, pad, exts, payload, data)


def ether_for(eth, ethertype):
    """The Ethernet header (and 802.1Q tag, if the vector has a VLAN) in front of a packet."""
    vlan = eth.get("vlan")
    if vlan is None:
        return Ether(dst=eth["dst"], src=eth["src"], type=ethertype)
    return Ether(dst=eth["dst"], src=eth["src"], type=0x8100) / Dot1Q(
        prio=vlan >> 13, id=(vlan >> 12) & 1, vlan=vlan & 0xFFF, type=ethertype)


def eth_fields_of(eth, layer):
    """The vector fields of a framed packet: its layer name, the MAC addresses and the VLAN."""
    vlan = eth.get("vlan")
    return dict(layer=layer, eth_dst=eth["dst"].replace(":", ""),
                eth_src=eth["src"].replace(":", ""), vlan=vlan if vlan is not None else -1)


def finish_vector(vec, pkt, pad, exts, payload, data):
    """Adds what every vector ends with, v2 or v1: the BTH and extension header fields, the
    payload, the ICRC (the last 4 bytes, least significant first) and the bytes themselves."""
    vec.update(bth_fields_of(pkt[BTH], pad))
    for e in exts:
        vec.update(ext_fields_of(e))
    vec["payload"] = payload.hex() or "-"
    vec["icrc"] = int.from_bytes(data[-4:], "little")
    vec["bytes"] = data.hex()
    return vec


def bth_fields_of(f, pad):
    return dict(opcode=f.opcode, se=f.solicited, migreq=f.migreq, pad=pad, pkey=f.pkey,
                fecn=f.fecn, becn=f.becn, dqpn=f.dqpn, ackreq=f.ackreq, psn=f.psn)


def ext_fields_of(e):
    """The vector fields of one extension header."""
    if isinstance(e, RETH):
        return dict(reth_va=e.va, reth_rkey=e.rkey, reth_len=e.dlen)
    if isinstance(e, AETH):
        return dict(aeth_syndrome=e.syndrome, aeth_msn=e.msn)
    if isinstance(e, AtomicETH):
        return dict(atomic_va=e.va, atomic_rkey=e.rkey, atomic_swap=e.swap, atomic_cmp=e.comp)
    if isinstance(e, AtomicAckETH):
        return dict(atomic_orig=e.orig)
    if isinstance(e, ImmDt):
        return dict(imm=e.imm)
    if isinstance(e, IETH):
        return dict(ieth_rkey=e.rkey)
    if isinstance(e, DETH):
        return dict(deth_qkey=e.qkey, deth_srcqp=e.srcqp)
    if isinstance(e, XRCETH):
        return dict(xrc_srqn=e.srqn)
    return {}


def vectors():
    p7 = bytes(range(0x41, 0x48))
    v = []
    v.append(make("rc_send_only_v4", 0x04, [], b"abcd", psn=5, dqpn=0x11))
    v.append(make("rc_send_only_pad3_v4", 0x04, [], b"hello", psn=0xFFFFFF, dqpn=0xABCDEF,
                  ackreq=1, solicited=1))
    v.append(make("rc_send_only_empty_v6", 0x04, [], b"", v6=True, psn=1, dqpn=2, flow=0x12345,
                  dscp=26))
    v.append(make("rc_send_first_v6", 0x00, [], bytes(range(64)), v6=True, psn=0x800000,
                  dqpn=0x100))
    v.append(make("rc_send_last_imm_pad1_v4", 0x03, [ImmDt(imm=0xDEADBEEF)], b"xyz", psn=77,
                  dqpn=0x33, ackreq=1))
    v.append(make("rc_send_only_inv_v4", 0x17, [IETH(rkey=0x1234ABCD)], b"inv!", psn=9, dqpn=7))
    v.append(make("rc_write_only_pad1_v4", 0x0A,
                  [RETH(va=0x00007F0012345678, rkey=0xCAFE0001, dlen=7)], p7, psn=0x123456,
                  dqpn=0x000012, ackreq=1))
    v.append(make("rc_write_only_pad1_v6", 0x0A,
                  [RETH(va=0xFFFF800000001000, rkey=0x11223344, dlen=7)], p7, v6=True,
                  psn=0x654321, dqpn=0xFEDCBA, flow=0xFFFFF, ecn=3))
    v.append(make("rc_write_only_imm_pad2_v6", 0x0B,
                  [RETH(va=0x1000, rkey=0x42, dlen=6), ImmDt(imm=0x01020304)], b"sixsix",
                  v6=True, psn=3, dqpn=4, solicited=1))
    v.append(make("rc_write_first_fecn_v4", 0x06, [RETH(va=0x2000, rkey=0x77, dlen=8192)],
                  bytes(256), psn=10, dqpn=11, fecn=1, ecn=3, dscp=46))
    v.append(make("uc_write_last_pad2_v4", 0x28, [], b"uc", psn=12, dqpn=13))
    v.append(make("rc_read_request_v4", 0x0C, [RETH(va=0xABCDEF0123456789, rkey=0x5,
                                                    dlen=65536)], psn=100, dqpn=0x42, ackreq=1))
    v.append(make("rc_read_response_only_pad2_v4", 0x10, [AETH(syndrome=0x1F, msn=0x000101)],
                  bytes(range(10)), psn=100, dqpn=0x43))
    v.append(make("rc_read_response_middle_v6", 0x0E, [], bytes(range(128)), v6=True, psn=101,
                  dqpn=0x43))
    v.append(make("rc_ack_v4", 0x11, [AETH(syndrome=0x1F, msn=0xFFFFFF)], psn=0xFFFFFF,
                  dqpn=0x99))
    v.append(make("rc_nak_psn_seq_v6", 0x11, [AETH(syndrome=0x60, msn=5)], v6=True, psn=6,
                  dqpn=0x98))
    v.append(make("rc_rnr_nak_v4", 0x11, [AETH(syndrome=0x20 | 14, msn=8)], psn=9, dqpn=0x97))
    v.append(make("rc_nak_remote_access_v4", 0x11, [AETH(syndrome=0x62, msn=8)], psn=9,
                  dqpn=0x97))
    v.append(make("rc_cmp_swap_v4", 0x13, [AtomicETH(va=0x8000, rkey=0x99, swap=0x1111222233334444,
                                                     comp=0x5555666677778888)], psn=200,
                  dqpn=0x55, ackreq=1))
    v.append(make("rc_fetch_add_v6", 0x14, [AtomicETH(va=0x8008, rkey=0x9A, swap=1, comp=0)],
                  v6=True, psn=201, dqpn=0x55, ackreq=1))
    v.append(make("rc_atomic_ack_v4", 0x12, [AETH(syndrome=0x1F, msn=3),
                                             AtomicAckETH(orig=0xFEEDFACECAFEBEEF)], psn=200,
                  dqpn=0x56))
    v.append(make("ud_send_only_pad3_v4", 0x64, [DETH(qkey=0x80010000, srcqp=0xABCDE)],
                  b"datagram!", psn=1000, dqpn=0x1234, sport=0xD001))
    v.append(make("ud_send_only_imm_v6", 0x65, [DETH(qkey=0x11111111, srcqp=1),
                                                ImmDt(imm=0xA5A5A5A5)], b"imm!", v6=True,
                  psn=1001, dqpn=0x1235))
    v.append(make("cnp_v4", 0x81, [CNPPadding()], psn=0, dqpn=0x2468, migreq=0, becn=1, ecn=1))
    v.append(make("cnp_v6", 0x81, [CNPPadding()], v6=True, psn=0, dqpn=0x2469, migreq=0, becn=1,
                  dscp=48))
    v.append(make("eth_vlan_rc_write_only_v4", 0x0A, [RETH(va=0x3000, rkey=0x31, dlen=5)],
                  b"vlan!", psn=300, dqpn=0x301,
                  eth=dict(dst="02:00:00:00:00:02", src="02:00:00:00:00:01", vlan=0x6064)))
    v.append(make("eth_rc_ack_v6", 0x11, [AETH(syndrome=0x1F, msn=4)], v6=True, psn=301,
                  dqpn=0x302, eth=dict(dst="02:00:00:00:00:04", src="02:00:00:00:00:03")))
    return v


# ---- RoCE v1 ----

GRH_NEXT_HEADER_IBA = 0x1B
ETHERTYPE_ROCE_V1 = 0x8915
GID_V4_A = bytes(10) + b"\xff\xff" + bytes([198, 18, 0, 1])  # ::ffff:198.18.0.1
GID_V4_B = bytes(10) + b"\xff\xff" + bytes([198, 18, 0, 2])
GID_V6_A = bytes.fromhex("fd000000000000010000000000000001")  # fd00:0:0:1::1
GID_LL_B = bytes.fromhex("fe8000000000000000000000000000b2")  # fe80::b2


def icrc_v1(grh_pkt_bytes):
    """ICRC of a RoCE v1 packet (GRH .. pad, no ICRC), masked as IBA 7.8.1 and annex A16 say."""
    b = bytearray(grh_pkt_bytes)
    b[0] |= 0x0F  # traffic class (low nibble of byte 0 is its high nibble)
    b[1] = b[2] = b[3] = 0xFF  # traffic class and flow label
    b[7] = 0xFF  # hop limit
    b[40 + 4] = 0xFF  # BTH reserved byte (Resv8a)
    return zlib.crc32(b"\xff" * 8 + bytes(b)) & 0xFFFFFFFF


# IBA table 38: the extension headers each opcode carries, in wire order, keyed by the RC opcode
# (UC and XRC reuse the RC numbering in the low five bits).
RC_EXTS = {0x03: [ImmDt], 0x05: [ImmDt], 0x06: [RETH], 0x09: [ImmDt], 0x0A: [RETH],
           0x0B: [RETH, ImmDt], 0x0C: [RETH], 0x0D: [AETH], 0x0F: [AETH], 0x10: [AETH],
           0x11: [AETH], 0x12: [AETH, AtomicAckETH], 0x13: [AtomicETH], 0x14: [AtomicETH],
           0x16: [IETH], 0x17: [IETH]}


def exts_for(opcode):
    service, op = opcode >> 5, opcode & 0x1F
    if service == 0:  # RC
        return list(RC_EXTS.get(op, []))
    if service == 1:  # UC: SEND and WRITE only
        return list(RC_EXTS.get(op, [])) if op <= 0x0B else None
    if service == 3 and op in (0x04, 0x05):  # UD SEND_ONLY, SEND_ONLY_WITH_IMMEDIATE
        return [DETH] + RC_EXTS.get(op, [])
    if service == 5:  # XRC: requests carry an XRCETH after the BTH (annex A14)
        exts = RC_EXTS.get(op, [])
        return exts if 0x0D <= op <= 0x12 else [XRCETH] + exts
    return None


def v1_packet(opcode, exts, payload, tclass, flow, hop, sgid, dgid, bth):
    """A scapy GRH/BTH packet with its payload length and its v1 ICRC filled in."""
    pad = (4 - len(payload) % 4) % 4
    fields = dict(opcode=opcode, padcount=pad, pkey=0xFFFF, icrc=0)
    fields.update(bth)
    b = BTH(**fields)
    for e in exts:
        b = b / e
    b = b / Raw(payload + b"\x00" * pad)
    grh = GRH(ipver=6, tclass=tclass, flowlabel=flow, paylen=len(raw(b)), nexthdr=0x1B,
              hoplmt=hop, sgid=int.from_bytes(sgid, "big"), dgid=int.from_bytes(dgid, "big"))
    pkt = grh / b
    value = icrc_v1(raw(pkt)[:-4])
    pkt[BTH].icrc = int.from_bytes(value.to_bytes(4, "little"), "big")
    return pkt, pad


def make_v1(name, opcode, exts, payload=b"", tclass=0, flow=0, hop=64, sgid=GID_V4_A,
            dgid=GID_V4_B, eth=None, **bth):
    assert [type(e) for e in exts] == exts_for(opcode), f"{name}: headers not table 38's"
    pkt, pad = v1_packet(opcode, exts, payload, tclass, flow, hop, sgid, dgid,
                         dict(migreq=1, **bth))
    data = raw(pkt)
    vec = dict(name=name, layer="v1")
    if eth is not None:
        data = raw(ether_for(eth, ETHERTYPE_ROCE_V1)) + data
        vec.update(eth_fields_of(eth, "v1eth"))
    vec.update(tclass=tclass, flow=flow, hop=hop, sgid=sgid.hex(), dgid=dgid.hex())
    return finish_vector(vec, pkt, pad, exts, payload, data)


def check_icrc_v1_by_hand():
    """icrc_v1() and v1_packet() against a v1 packet laid out by hand (wire_v1_test.cpp)."""
    want = ("6b812345" "00141b01" "00000000000000000000ffffc6120001"
            "00000000000000000000ffffc6120002" "04d0ffff0000001280000100" "aabbcc00" "708d72b2")
    pkt, _ = v1_packet(0x04, [], b"\xaa\xbb\xcc", 0xB8, 0x12345, 1, GID_V4_A, GID_V4_B,
                       dict(solicited=1, migreq=1, dqpn=0x12, ackreq=1, psn=0x100))
    assert raw(pkt).hex() == want, raw(pkt).hex()


def v1_vectors():
    check_icrc_v1_by_hand()
    p7 = bytes(range(0x41, 0x48))
    frame = dict(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
    v = []
    v.append(make_v1("v1_rc_send_only", 0x04, [], b"abcd", psn=5, dqpn=0x11))
    v.append(make_v1("v1_rc_send_only_pad3_tclass", 0x04, [], b"hello", tclass=0xB8,
                     flow=0x12345, hop=1, psn=0xFFFFFF, dqpn=0xABCDEF, ackreq=1, solicited=1))
    v.append(make_v1("v1_rc_send_only_empty_v6gid", 0x04, [], b"", sgid=GID_V6_A,
                     dgid=GID_LL_B, flow=0xFFFFF, tclass=0xFF, psn=1, dqpn=2))
    v.append(make_v1("v1_rc_send_first", 0x00, [], bytes(range(64)), psn=0x800000, dqpn=0x100))
    v.append(make_v1("v1_rc_send_last_imm_pad1", 0x03, [ImmDt(imm=0xDEADBEEF)], b"xyz", psn=77,
                     dqpn=0x33, ackreq=1))
    v.append(make_v1("v1_rc_send_only_inv", 0x17, [IETH(rkey=0x1234ABCD)], b"inv!", psn=9,
                     dqpn=7))
    v.append(make_v1("v1_rc_write_only_pad1", 0x0A,
                     [RETH(va=0x00007F0012345678, rkey=0xCAFE0001, dlen=7)], p7, psn=0x123456,
                     dqpn=0x000012, ackreq=1))
    v.append(make_v1("v1_rc_write_only_imm_pad2", 0x0B,
                     [RETH(va=0x1000, rkey=0x42, dlen=6), ImmDt(imm=0x01020304)], b"sixsix",
                     sgid=GID_V6_A, dgid=GID_LL_B, psn=3, dqpn=4, solicited=1))
    v.append(make_v1("v1_uc_write_last_pad2", 0x28, [], b"uc", psn=12, dqpn=13))
    v.append(make_v1("v1_rc_read_request", 0x0C,
                     [RETH(va=0xABCDEF0123456789, rkey=0x5, dlen=65536)], psn=100, dqpn=0x42,
                     ackreq=1))
    v.append(make_v1("v1_rc_read_response_only_pad2", 0x10, [AETH(syndrome=0x1F, msn=0x000101)],
                     bytes(range(10)), psn=100, dqpn=0x43))
    v.append(make_v1("v1_rc_read_response_middle", 0x0E, [], bytes(range(128)), psn=101,
                     dqpn=0x43))
    v.append(make_v1("v1_rc_ack", 0x11, [AETH(syndrome=0x1F, msn=0xFFFFFF)], psn=0xFFFFFF,
                     dqpn=0x99))
    v.append(make_v1("v1_rc_nak_psn_seq", 0x11, [AETH(syndrome=0x60, msn=5)], psn=6, dqpn=0x98))
    v.append(make_v1("v1_rc_rnr_nak", 0x11, [AETH(syndrome=0x20 | 14, msn=8)], psn=9, dqpn=0x97))
    v.append(make_v1("v1_rc_cmp_swap", 0x13,
                     [AtomicETH(va=0x8000, rkey=0x99, swap=0x1111222233334444,
                                comp=0x5555666677778888)], psn=200, dqpn=0x55, ackreq=1))
    v.append(make_v1("v1_rc_fetch_add", 0x14, [AtomicETH(va=0x8008, rkey=0x9A, swap=1, comp=0)],
                     psn=201, dqpn=0x55, ackreq=1))
    v.append(make_v1("v1_rc_atomic_ack", 0x12,
                     [AETH(syndrome=0x1F, msn=3), AtomicAckETH(orig=0xFEEDFACECAFEBEEF)],
                     psn=200, dqpn=0x56))
    v.append(make_v1("v1_ud_send_only_pad3", 0x64, [DETH(qkey=0x80010000, srcqp=0xABCDE)],
                     b"datagram!", psn=1000, dqpn=0x1234))
    v.append(make_v1("v1_ud_send_only_imm", 0x65, [DETH(qkey=0x11111111, srcqp=1),
                                                   ImmDt(imm=0xA5A5A5A5)], b"imm!",
                     sgid=GID_V6_A, dgid=GID_LL_B, psn=1001, dqpn=0x1235))
    v.append(make_v1("v1_xrc_send_only", 0xA4, [XRCETH(srqn=0x00ABCD)], b"xrc", psn=400,
                     dqpn=0x401))
    v.append(make_v1("v1eth_rc_write_only", 0x0A, [RETH(va=0x3000, rkey=0x31, dlen=5)],
                     b"eth!!", psn=300, dqpn=0x301, eth=frame))
    v.append(make_v1("v1eth_vlan_rc_send_only", 0x04, [], b"vlan", tclass=0x60, psn=302,
                     dqpn=0x303, eth=dict(frame, vlan=5 << 13 | 100)))
    v.append(make_v1("v1eth_vlan_prio_tag_ud_send_only", 0x64, [DETH(qkey=0x11, srcqp=0x22)],
                     b"prio", psn=304, dqpn=0x305, eth=dict(frame, vlan=3 << 13)))
    v.append(make_v1("v1eth_rc_ack", 0x11, [AETH(syndrome=0x1F, msn=4)], psn=301, dqpn=0x302,
                     eth=dict(dst="02:00:00:00:00:01", src="02:00:00:00:00:02")))
    return v


def read_blocks(path):
    blocks, cur = [], None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            if line.startswith("[") and line.endswith("]"):
                cur = {"name": line[1:-1]}
                blocks.append(cur)
                continue
            key, _, val = line.partition(" ")
            cur[key] = val
    return blocks


def dissect_v1(data, layer):
    """Every vector field of a v1 packet or frame, as scapy reads it; raises on what is wrong."""
    got = dict(layer=layer)
    if layer == "v1eth":
        frame = Ether(data)
        got.update(eth_dst=frame.dst.replace(":", ""), eth_src=frame.src.replace(":", ""))
        if Dot1Q in frame:
            q = frame[Dot1Q]
            got["vlan"] = q.prio << 13 | q.id << 12 | q.vlan
            assert q.type == ETHERTYPE_ROCE_V1, f"EtherType {q.type:#x}"
        else:
            got["vlan"] = -1
            assert frame.type == ETHERTYPE_ROCE_V1, f"EtherType {frame.type:#x}"
        grh = frame[GRH]
    else:
        grh = GRH(data)
    grh_bytes = raw(grh)
    assert grh.ipver == 6, f"GRH version {grh.ipver}"
    assert grh.nexthdr == GRH_NEXT_HEADER_IBA, f"GRH next header {grh.nexthdr:#x}"
    assert grh.paylen == len(grh_bytes) - 40, f"GRH payload length {grh.paylen}"
    got.update(tclass=grh.tclass, flow=grh.flowlabel, hop=grh.hoplmt,
               sgid=grh.sgid.to_bytes(16, "big").hex(), dgid=grh.dgid.to_bytes(16, "big").hex())
    bth = grh[BTH]
    # Integrity first, as a receiver checks it: a changed byte is a bad ICRC, whatever it hit.
    wire_icrc = int.from_bytes(bth.icrc.to_bytes(4, "big"), "little")
    want_icrc = icrc_v1(grh_bytes[:-4])
    assert wire_icrc == want_icrc, f"ICRC {wire_icrc:#010x}, annex A16 says {want_icrc:#010x}"
    assert bth.version == 0, f"BTH TVer {bth.version}"
    got.update(bth_fields_of(bth, bth.padcount))
    kinds = exts_for(bth.opcode)
    assert kinds is not None, f"opcode {bth.opcode:#x} is not a v1 transport opcode"
    rest = raw(bth.payload)
    for kind in kinds:
        size = len(raw(kind()))
        assert len(rest) >= size, f"{kind.name} truncated"
        got.update(ext_fields_of(kind(rest[:size])))
        rest = rest[size:]
    pad = bth.padcount
    assert len(rest) >= pad and rest[len(rest) - pad:] == bytes(pad), "pad bytes not zero"
    got["payload"] = rest[:len(rest) - pad].hex() or "-"
    got["icrc"] = wire_icrc
    return got


def rebuild_v1(vec):
    """The bytes scapy builds from a vector's fields."""
    kinds = exts_for(int(vec["opcode"]))
    exts = []
    for kind in kinds:
        e = kind()
        names = ext_fields_of(e)
        for key in names:
            setattr(e, {"reth_va": "va", "reth_rkey": "rkey", "reth_len": "dlen",
                        "aeth_syndrome": "syndrome", "aeth_msn": "msn", "atomic_va": "va",
                        "atomic_rkey": "rkey", "atomic_swap": "swap", "atomic_cmp": "comp",
                        "atomic_orig": "orig", "imm": "imm", "ieth_rkey": "rkey",
                        "deth_qkey": "qkey", "deth_srcqp": "srcqp",
                        "xrc_srqn": "srqn"}[key], int(vec[key]))
        exts.append(e)
    payload = b"" if vec["payload"] == "-" else bytes.fromhex(vec["payload"])
    bth = {k: int(vec[v]) for k, v in dict(solicited="se", migreq="migreq", pkey="pkey",
                                           fecn="fecn", becn="becn", dqpn="dqpn",
                                           ackreq="ackreq", psn="psn").items()}
    pkt, _ = v1_packet(int(vec["opcode"]), exts, payload, int(vec["tclass"]), int(vec["flow"]),
                       int(vec["hop"]), bytes.fromhex(vec["sgid"]), bytes.fromhex(vec["dgid"]),
                       bth)
    data = raw(pkt)
    if vec["layer"] == "v1eth":
        vlan = int(vec["vlan"])
        eth = dict(dst=":".join(vec["eth_dst"][i:i + 2] for i in range(0, 12, 2)),
                   src=":".join(vec["eth_src"][i:i + 2] for i in range(0, 12, 2)))
        if vlan >= 0:
            eth["vlan"] = vlan
        data = raw(ether_for(eth, ETHERTYPE_ROCE_V1)) + data
    return data


def check_v1(path):
    """Checks every block of `path` in scapy; prints what differs, returns the failure count."""
    check_icrc_v1_by_hand()
    failures = 0
    blocks = read_blocks(path)
    for vec in blocks:
        name = vec.pop("name")
        data = bytes.fromhex(vec.pop("bytes"))
        problems = []
        try:
            got = {k: str(v) for k, v in dissect_v1(data, vec.get("layer")).items()}
            for key in sorted(set(vec) | set(got)):
                if vec.get(key) != got.get(key):
                    problems.append(f"{key}: file {vec.get(key)}, scapy {got.get(key)}")
            if not problems and rebuild_v1(vec) != data:
                problems.append(f"scapy builds {rebuild_v1(vec).hex()} from the fields")
        except Exception as e:  # noqa: BLE001 - a frame scapy cannot read is a failure to report
            problems.append(f"{type(e).__name__}: {e}")
        for p in problems:
            print(f"{name}: {p}")
        failures += bool(problems)
    print(f"checked {len(blocks)} v1 packets, {failures} failed")
    return failures


def main():
    out = sys.stdout
    if sys.argv[1:2] == ["--check-v1"]:
        sys.exit(1 if check_v1(sys.argv[2]) else 0)
    if sys.argv[1:] == ["--v1"]:
        out.write("# RoCE v1 packets built by scapy (scripts/gen-wire-vectors.py --v1); do not edit.\n")
        out.write("# One block per packet: [name], then 'key value' lines; numbers are decimal,\n")
        out.write("# byte strings hex ('-' for none). icrc is the value read least significant\n")
        out.write("# byte first (IBA annex A16). layer v1: GRH .. ICRC; v1eth: a whole Ethernet\n")
        out.write("# frame, EtherType 0x8915 (vlan -1: untagged). GIDs are 16 bytes hex.\n")
        for vec in v1_vectors():
            out.write(f"\n[{vec.pop('name')}]\n")
            for k, val in vec.items():
                out.write(f"{k} {val}\n")
        return
    out.write("# RoCEv2 packets built by scapy (scripts/gen-wire-vectors.py); do not edit.\n")
    out.write("# One block per packet: [name], then 'key value' lines; numbers are decimal,\n")
    out.write("# byte strings hex ('-' for none). icrc is the value read least significant byte\n")
    out.write("# first. layer=eth blocks hold a whole Ethernet frame (vlan -1: untagged).\n")
    for vec in vectors():
        out.write(f"\n[{vec.pop('name')}]\n")
        for k, val in vec.items():
            out.write(f"{k} {val}\n")


if __name__ == "__main__":
    main()
