#!/usr/bin/python3
"""Generates tests/vectors/roce_scapy.txt: RoCEv2 packets built by scapy, with their fields.

The C++ test tests/unit/wire_vectors_test.cpp reads the file and checks both ways: uroce parses
scapy's bytes into the listed fields (ICRC included), and uroce builds the same bytes from those
fields, apart from the UDP checksum, which scapy fills in and RoCEv2 masks (uroce sends 0).

scapy.contrib.roce has the BTH, AETH and CNP layers and computes the ICRC for IPv4 only. The other
extension headers are declared here from IBA 9.3 (sizes and field widths), and the IPv6 ICRC is
computed here by the annex A17 recipe. That code is checked first against scapy's own IPv4 ICRC on
every IPv4 vector, so a mistake in it cannot pass silently.

Needs Debian's python3-scapy, so run it with /usr/bin/python3:
    /usr/bin/python3 scripts/gen-wire-vectors.py > tests/vectors/roce_scapy.txt
The output is deterministic; rerunning it must leave the file unchanged.
"""

import sys
import zlib

from scapy.compat import raw
from scapy.config import conf
from scapy.contrib.roce import AETH, BTH, CNPPadding
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
        vlan = eth.get("vlan")
        ethertype = 0x86DD if v6 else 0x0800
        if vlan is None:
            frame = Ether(dst=eth["dst"], src=eth["src"], type=ethertype)
        else:
            frame = Ether(dst=eth["dst"], src=eth["src"], type=0x8100) / Dot1Q(
                prio=vlan >> 13, id=(vlan >> 12) & 1, vlan=vlan & 0xFFF, type=ethertype)
        data = raw(frame) + data
        vec.update(layer="eth", eth_dst=eth["dst"].replace(":", ""),
                   eth_src=eth["src"].replace(":", ""), vlan=vlan if vlan is not None else -1)
    f = pkt[BTH]
    vec.update(opcode=opcode, se=f.solicited, migreq=f.migreq, pad=pad, pkey=f.pkey, fecn=f.fecn,
               becn=f.becn, dqpn=f.dqpn, ackreq=f.ackreq, psn=f.psn)
    for e in exts:
        if isinstance(e, RETH):
            vec.update(reth_va=e.va, reth_rkey=e.rkey, reth_len=e.dlen)
        elif isinstance(e, AETH):
            vec.update(aeth_syndrome=e.syndrome, aeth_msn=e.msn)
        elif isinstance(e, AtomicETH):
            vec.update(atomic_va=e.va, atomic_rkey=e.rkey, atomic_swap=e.swap, atomic_cmp=e.comp)
        elif isinstance(e, AtomicAckETH):
            vec.update(atomic_orig=e.orig)
        elif isinstance(e, ImmDt):
            vec.update(imm=e.imm)
        elif isinstance(e, IETH):
            vec.update(ieth_rkey=e.rkey)
        elif isinstance(e, DETH):
            vec.update(deth_qkey=e.qkey, deth_srcqp=e.srcqp)
    vec["payload"] = payload.hex() or "-"
    vec["icrc"] = int.from_bytes(data[-4:], "little")
    vec["bytes"] = data.hex()
    return vec


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


def main():
    out = sys.stdout
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
