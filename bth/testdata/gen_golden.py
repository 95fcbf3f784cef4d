#!/usr/bin/python3
"""Generate bth/testdata/golden.json: RoCEv2 frames with independently
computed ICRCs, the golden vectors of bth's tests.

How the vectors were made (Debian 12: apt-get install python3-scapy tshark):

    cd bth/testdata && /usr/bin/python3 gen_golden.py [--tshark]

Nothing here shares code with the Go package; the Go tests only read the JSON
this writes, so they need no Python.

* Ethernet, 802.1Q, IPv4 (with its header checksum), IPv6, UDP (with the IPv6
  UDP checksum over the final packet, ICRC included) and the BTH bit layout
  are built by scapy.
* Extension headers are packed here with struct from the IBA 9.3 layouts
  (softnic's PETH, RWSNETH, SACKETH and HolesETH and StaR's headers from
  docs/wire.md), in the header order listed
  in HEADERS (IBA 9.2 / rxe_opcode.c, softnic's headers last).
* IPv4 ICRCs are computed by scapy.contrib.roce (BTH.compute_icrc), which
  supports only IPv4: for IPv6 it warns and writes 0. So IPv6 ICRCs come
  from icrc() below, a direct transcription of the rule in IBA Annex A17.4 /
  Linux rxe_icrc.c. icrc() is cross-checked against scapy on every IPv4
  vector, and the script fails if they ever disagree.
* With --tshark, the frames are also written to a pcap and decoded by
  tshark, whose InfiniBand dissector claims UDP port 4791 by default; the
  script fails unless tshark reads each vector's opcode, QPN, PSN, MSN, DMA
  length and source QPN as written, and finds the IPv4 header checksums and
  IPv6 UDP checksums good. Checked with TShark 4.0.17: all vectors pass.
  (That tshark does not verify ICRCs.)
"""

import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

from scapy.compat import raw
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw

ROCE_PORT = 4791

# Extension headers after the BTH, in wire order, per opcode.
HEADERS = {
    0x00: ["payload"],                    # RC_SEND_FIRST
    0x01: ["payload"],                    # RC_SEND_MIDDLE
    0x02: ["payload"],                    # RC_SEND_LAST
    0x03: ["imm", "payload"],             # RC_SEND_LAST_WITH_IMMEDIATE
    0x04: ["payload"],                    # RC_SEND_ONLY
    0x05: ["imm", "payload"],             # RC_SEND_ONLY_WITH_IMMEDIATE
    0x06: ["reth", "payload"],            # RC_RDMA_WRITE_FIRST
    0x07: ["payload"],                    # RC_RDMA_WRITE_MIDDLE
    0x08: ["payload"],                    # RC_RDMA_WRITE_LAST
    0x09: ["imm", "payload"],             # RC_RDMA_WRITE_LAST_WITH_IMMEDIATE
    0x0A: ["reth", "payload"],            # RC_RDMA_WRITE_ONLY
    0x0B: ["reth", "imm", "payload"],     # RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE
    0x0C: ["reth"],                       # RC_RDMA_READ_REQUEST
    0x0D: ["aeth", "payload"],            # RC_RDMA_READ_RESPONSE_FIRST
    0x0E: ["payload"],                    # RC_RDMA_READ_RESPONSE_MIDDLE
    0x0F: ["aeth", "payload"],            # RC_RDMA_READ_RESPONSE_LAST
    0x10: ["aeth", "payload"],            # RC_RDMA_READ_RESPONSE_ONLY
    0x11: ["aeth"],                       # RC_ACKNOWLEDGE
    0x12: ["aeth", "atomic_ack"],         # RC_ATOMIC_ACKNOWLEDGE
    0x13: ["atomic"],                     # RC_COMPARE_SWAP
    0x14: ["atomic"],                     # RC_FETCH_ADD
    0x16: ["ieth", "payload"],            # RC_SEND_LAST_WITH_INVALIDATE
    0x17: ["ieth", "payload"],            # RC_SEND_ONLY_WITH_INVALIDATE
    0x64: ["deth", "payload"],            # UD_SEND_ONLY
    0x65: ["deth", "imm", "payload"],     # UD_SEND_ONLY_WITH_IMMEDIATE
    # softnic's extensions (docs/wire.md): the RC opcode + 0xC0; SENDs with
    # a PETH, WRITEs with a RETH on every packet, and the last packet of a
    # WRITE with immediate with an RWSNETH after its ImmDt
    # last and the RETH on every RDMA WRITE packet; the IRN NACK.
    0xC0: ["peth", "payload"],                   # RC_SEND_FIRST_OOO
    0xC1: ["peth", "payload"],                   # RC_SEND_MIDDLE_OOO
    0xC2: ["peth", "payload"],                   # RC_SEND_LAST_OOO
    0xC3: ["imm", "peth", "payload"],            # RC_SEND_LAST_WITH_IMMEDIATE_OOO
    0xC4: ["peth", "payload"],                   # RC_SEND_ONLY_OOO
    0xC5: ["imm", "peth", "payload"],            # RC_SEND_ONLY_WITH_IMMEDIATE_OOO
    0xC6: ["reth", "payload"],                   # RC_RDMA_WRITE_FIRST_OOO
    0xC7: ["reth", "payload"],                   # RC_RDMA_WRITE_MIDDLE_OOO
    0xC8: ["reth", "payload"],                   # RC_RDMA_WRITE_LAST_OOO
    0xC9: ["reth", "imm", "rwsn", "payload"],    # RC_RDMA_WRITE_LAST_WITH_IMMEDIATE_OOO
    0xCA: ["reth", "payload"],                   # RC_RDMA_WRITE_ONLY_OOO
    0xCB: ["reth", "imm", "rwsn", "payload"],    # RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE_OOO
    0xD1: ["aeth", "sack"],                      # RC_ACKNOWLEDGE_SACK
    0xD2: ["aeth", "sack"],                      # RC_ACKNOWLEDGE_SACK_OVERFLOW
    0xD3: ["aeth", "sack"],                      # RC_ACKNOWLEDGE_FNAK
    0xD4: ["aeth", "holes"],                     # RC_ACKNOWLEDGE_HOLES
    # StaR's stateless mode (docs/wire.md): one header each.
    0xE0: ["wqep"],                              # STAR_WQEP
    0xE1: ["cqep"],                              # STAR_CQEP
    0xE2: ["ea"],                                # STAR_EA
    0xE3: ["rdp", "payload"],                    # STAR_RDP
    0xE4: ["aeth"],                              # STAR_RA
    0xE5: ["gd"],                                # STAR_GD
    0xE6: ["sdp", "payload"],                    # STAR_SDP
}

# StaR's header layouts (docs/wire.md), big-endian, and their lengths.
STAR_LAYOUTS = {
    # DriverSeq, Kind, Flags, reserved (2), WRID, LocalVA, LocalKey,
    # Length, RemoteVA, RemoteKey, Imm
    "wqep": (">IBBHQQIIQII", 48),
    # DriverSeq, Status, Opcode, Flags, reserved, ByteLen, Imm
    "cqep": (">IBBBBII", 16),
    # Kind, reserved (3), DriverSeq
    "ea": (">B3xI", 8),
    # VA, RKey, Flags (the payload's length is the frame's; the BTH
    # DestQP is the client's QP, where the RA goes)
    "rdp": (">QIB", 13),
    # VA, RKey, Length, MTU, Flags (the BTH DestQP is the client's QP)
    "gd": (">QIHBB", 16),
    # Offset
    "sdp": (">I", 4),
}
for _fmt, _n in STAR_LAYOUTS.values():
    assert struct.calcsize(_fmt) == _n, (_fmt, _n)

def ack(credit):
    return credit & 0x1F  # AETH syndrome 0b00xxxxx


def rnr_nak(timer):
    return 0x20 | (timer & 0x1F)  # 0b01xxxxx


def nak(code):
    return 0x60 | (code & 0x1F)  # 0b11xxxxx


def pack_ext(name, v):
    """Pack one extension header from its IBA 9.3 layout (big-endian)."""
    if name == "reth":
        return struct.pack(">QII", v["va"], v["rkey"], v["dmalen"])
    if name == "aeth":
        return struct.pack(">I", v["syndrome"] << 24 | v["msn"])
    if name in ("imm", "ieth"):
        return struct.pack(">I", v)
    if name == "deth":
        return struct.pack(">IB3s", v["qkey"], 0, v["src_qpn"].to_bytes(3, "big"))
    if name == "atomic":
        return struct.pack(">QIQQ", v["va"], v["rkey"], v["swap_add"], v["compare"])
    if name == "atomic_ack":
        return struct.pack(">Q", v)
    if name == "peth":  # receive WQE SN (3), packet index (3)
        return v["recv_sn"].to_bytes(3, "big") + v["index"].to_bytes(3, "big")
    if name == "rwsn":  # receive WQE SN (3)
        return v.to_bytes(3, "big")
    if name == "sack":  # lost-cnt (1: 3 bits), PSN (3)
        return struct.pack(">I", v)
    if name == "holes":  # reserved (1), RCV.HIGH (3), 3 x (offset (2), length (2))
        b = struct.pack(">I", v["high"])
        for off, n in v["holes"]:
            b += struct.pack(">HH", off, n)
        return b
    if name == "wqep":
        return struct.pack(STAR_LAYOUTS[name][0], v["driver_seq"], v["kind"], v["flags"], 0,
                           v["wrid"], v["local_va"], v["local_key"], v["length"],
                           v["remote_va"], v["remote_key"], v["imm"])
    if name == "cqep":
        return struct.pack(STAR_LAYOUTS[name][0], v["driver_seq"], v["status"], v["opcode"],
                           v["flags"], 0, v["byte_len"], v["imm"])
    if name == "ea":
        return struct.pack(STAR_LAYOUTS[name][0], v["kind"], v["driver_seq"])
    if name == "rdp":
        return struct.pack(STAR_LAYOUTS[name][0], v["va"], v["rkey"], v["flags"])
    if name == "gd":
        return struct.pack(STAR_LAYOUTS[name][0], v["va"], v["rkey"], v["length"], v["mtu"],
                           v["flags"])
    if name == "sdp":
        return struct.pack(STAR_LAYOUTS[name][0], v["offset"])
    raise ValueError(name)


def icrc(frame, l3off, ipv6):
    """The Annex A17.4 ICRC, as rxe_icrc.c computes it: CRC-32 (IEEE) over
    eight 0xff bytes, the IP header with its variant fields set to ones,
    the UDP header with the checksum set to ones, the BTH with byte 4
    (resv8a / FECN, BECN) set to ones, and the rest of the packet up to the
    ICRC. Returned as the 4 bytes that go on the wire (least significant
    byte first)."""
    b = bytearray(frame[l3off:-4])
    if ipv6:
        iplen = 40
        b[0] |= 0x0F  # traffic class (high nibble)
        b[1:4] = b"\xff\xff\xff"  # traffic class (low nibble), flow label
        b[7] = 0xFF  # hop limit
    else:
        iplen = (b[0] & 0x0F) * 4
        b[1] = 0xFF  # TOS
        b[8] = 0xFF  # TTL
        b[10:12] = b"\xff\xff"  # header checksum
    b[iplen + 6:iplen + 8] = b"\xff\xff"  # UDP checksum
    b[iplen + 8 + 4] = 0xFF  # BTH resv8a
    crc = zlib.crc32(b"\xff" * 8 + bytes(b)) & 0xFFFFFFFF
    return struct.pack("<I", crc)


def build(v):
    """Build the frame for vector v and fill in its derived fields."""
    bth = v["bth"]
    payload = bytes.fromhex(v.get("payload", ""))
    pad = (-len(payload)) % 4
    bth["pad"] = pad
    after_bth = b""
    for name in HEADERS[bth["opcode"]]:
        if name == "payload":
            after_bth += payload + b"\x00" * pad
        else:
            after_bth += pack_ext(name, v[name])
    if "payload" not in HEADERS[bth["opcode"]]:
        assert not payload
    h = v["header"]
    bth_layer = BTH(
        opcode=bth["opcode"], solicited=bth["se"], migreq=bth["migreq"],
        padcount=pad, version=0, pkey=bth["pkey"], fecn=bth["fecn"],
        becn=bth["becn"], dqpn=bth["dqpn"], ackreq=bth["ackreq"],
        psn=bth["psn"])
    eth = Ether(src=h["src_mac"], dst=h["dst_mac"])
    if v.get("vlan") is not None:
        eth = eth / Dot1Q(prio=v["vlan"] >> 13, vlan=v["vlan"] & 0xFFF)
    l3off = 14 + (4 if v.get("vlan") is not None else 0)

    if not v["ipv6"]:
        # scapy computes the ICRC (FCSField icrc=None) and IP checksum.
        pkt = (eth / IP(src=h["src"], dst=h["dst"], tos=h["tos"], ttl=h["ttl"],
                        id=0, flags="DF")
               / UDP(sport=h["sport"], dport=ROCE_PORT, chksum=0)
               / bth_layer / Raw(after_bth))
        frame = raw(pkt)
        mine = icrc(frame, l3off, False)
        if frame[-4:] != mine:
            sys.exit("%s: scapy ICRC %s != icrc() %s"
                     % (v["name"], frame[-4:].hex(), mine.hex()))
    else:
        # scapy has no IPv6 ICRC; use icrc() and let scapy fill in the UDP
        # checksum over the finished packet.
        bth_layer.icrc = 0  # placeholder, not computed
        bth_bytes = raw(bth_layer)[:12]

        def frame_with(crc):
            return raw(eth / IPv6(src=h["src"], dst=h["dst"], tc=h["tos"],
                                  fl=h["flow_label"], hlim=h["ttl"])
                       / UDP(sport=h["sport"], dport=ROCE_PORT)
                       / Raw(bth_bytes + after_bth + crc))
        frame = frame_with(icrc(frame_with(b"\0" * 4), l3off, True))
        assert frame[-4:] == icrc(frame, l3off, True)
        assert frame[l3off + 46:l3off + 48] != b"\0\0"  # UDP checksum set
    v["frame"] = frame.hex()
    v["icrc"] = struct.unpack("<I", frame[-4:])[0]
    return frame


V4 = dict(src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:02",
          src="192.0.2.1", dst="192.0.2.2", sport=0xC123, tos=0x6A, ttl=64,
          flow_label=0)
V6 = dict(src_mac="02:00:00:00:00:03", dst_mac="02:00:00:00:00:04",
          src="2001:db8::1", dst="2001:db8::2", sport=0xD00D, tos=0x6A,
          ttl=64, flow_label=0x12345)


def bthf(opcode, dqpn, psn, se=0, migreq=1, pkey=0xFFFF, fecn=0, becn=0,
         ackreq=0):
    return dict(opcode=opcode, se=se, migreq=migreq, pkey=pkey, fecn=fecn,
                becn=becn, dqpn=dqpn, ackreq=ackreq, psn=psn)


def pattern(n, seed):
    return bytes((seed + 7 * i) & 0xFF for i in range(n)).hex()


def vec(name, ipv6, bth, header=None, **kw):
    h = dict(V6 if ipv6 else V4)
    h.update(header or {})
    v = dict(name=name, ipv6=ipv6, header=h, bth=bth)
    v.update(kw)
    return v


VECTORS = [
    # SEND
    vec("rc_send_first_v4", False, bthf(0x00, 0x000011, 0x000100), payload=pattern(64, 1)),
    vec("rc_send_middle_v6", True, bthf(0x01, 0x000011, 0x000101), payload=pattern(64, 2)),
    vec("rc_send_last_imm_v4", False, bthf(0x03, 0x000011, 0x000102, se=1, ackreq=1),
        imm=0xDEADBEEF, payload=pattern(13, 3)),
    vec("rc_send_only_v6", True, bthf(0x04, 0xABCDEF, 0xFFFFFF, ackreq=1),
        payload=pattern(5, 4)),
    vec("rc_send_only_imm_v6", True, bthf(0x05, 0x000022, 0x000010, se=1),
        imm=0x01020304, payload=pattern(8, 5)),
    vec("rc_send_last_v4_vlan", False, bthf(0x02, 0x000011, 0x000103),
        vlan=(3 << 13) | 100, payload=pattern(30, 6)),
    # SEND WITH INVALIDATE
    vec("rc_send_only_inv_v4", False, bthf(0x17, 0x000033, 0x000200, ackreq=1),
        ieth=0x00C0FFEE, payload=pattern(7, 7)),
    vec("rc_send_last_inv_v6", True, bthf(0x16, 0x000033, 0x000201),
        ieth=0x12345678, payload=pattern(16, 8)),
    # RDMA WRITE
    vec("rc_write_first_v4", False, bthf(0x06, 0x000044, 0x000300),
        reth=dict(va=0x00007F0012345000, rkey=0x1234, dmalen=4096), payload=pattern(64, 9)),
    vec("rc_write_middle_v4", False, bthf(0x07, 0x000044, 0x000301), payload=pattern(64, 10)),
    vec("rc_write_last_v6", True, bthf(0x08, 0x000044, 0x000302, ackreq=1), payload=pattern(61, 11)),
    vec("rc_write_only_v6", True, bthf(0x0A, 0x000044, 0x000303, ackreq=1),
        reth=dict(va=0xFFFFFFFFFFFFFFF0, rkey=0xFEDCBA98, dmalen=3), payload=pattern(3, 12)),
    vec("rc_write_only_imm_v4", False, bthf(0x0B, 0x000044, 0x000304, se=1, ackreq=1),
        reth=dict(va=0x1000, rkey=0x55AA55AA, dmalen=10), imm=0xCAFEF00D, payload=pattern(10, 13)),
    vec("rc_write_last_imm_v6", True, bthf(0x09, 0x000044, 0x000305, ackreq=1),
        imm=0x0000002A, payload=pattern(32, 14)),
    # RDMA READ
    vec("rc_read_request_v4", False, bthf(0x0C, 0x000055, 0x000400, ackreq=1),
        reth=dict(va=0x00007F0000001000, rkey=0x00ABCDEF, dmalen=3000)),
    vec("rc_read_request_v6", True, bthf(0x0C, 0x000055, 0x000401),
        reth=dict(va=0x2000, rkey=0x77, dmalen=1)),
    vec("rc_read_response_first_v4", False, bthf(0x0D, 0x000066, 0x000400),
        aeth=dict(syndrome=ack(0x1F), msn=0x000007), payload=pattern(64, 15)),
    vec("rc_read_response_middle_v6", True, bthf(0x0E, 0x000066, 0x000401), payload=pattern(64, 16)),
    vec("rc_read_response_last_v4", False, bthf(0x0F, 0x000066, 0x000402),
        aeth=dict(syndrome=ack(5), msn=0x000008), payload=pattern(21, 17)),
    vec("rc_read_response_only_v6", True, bthf(0x10, 0x000066, 0x000401),
        aeth=dict(syndrome=ack(0x1F), msn=0xFFFFFF), payload=pattern(1, 18)),
    # ACK / NAK
    vec("rc_ack_v4", False, bthf(0x11, 0x000077, 0x000500), aeth=dict(syndrome=ack(12), msn=0x000042)),
    vec("rc_ack_v6", True, bthf(0x11, 0x000077, 0x000501), aeth=dict(syndrome=ack(0x1F), msn=0x000043)),
    vec("rc_nak_psn_seq_v4", False, bthf(0x11, 0x000077, 0x000502, becn=1),
        header=dict(tos=0x6B), aeth=dict(syndrome=nak(0), msn=0x000043)),
    vec("rc_nak_remote_access_v6", True, bthf(0x11, 0x000077, 0x000503),
        aeth=dict(syndrome=nak(2), msn=0x000044)),
    vec("rc_rnr_nak_v4", False, bthf(0x11, 0x000077, 0x000504),
        aeth=dict(syndrome=rnr_nak(14), msn=0x000044)),
    # ATOMIC
    vec("rc_cmp_swap_v4", False, bthf(0x13, 0x000088, 0x000600, ackreq=1),
        atomic=dict(va=0x00007F0000002000, rkey=0x99, swap_add=0x1111111111111111,
                    compare=0x2222222222222222)),
    vec("rc_fetch_add_v6", True, bthf(0x14, 0x000088, 0x000601, ackreq=1),
        atomic=dict(va=0x00007F0000002008, rkey=0x99, swap_add=1, compare=0)),
    vec("rc_atomic_ack_v4", False, bthf(0x12, 0x000088, 0x000600),
        aeth=dict(syndrome=ack(3), msn=0x000010), atomic_ack=0x2222222222222222),
    vec("rc_atomic_ack_v6", True, bthf(0x12, 0x000088, 0x000601),
        aeth=dict(syndrome=ack(3), msn=0x000011), atomic_ack=0xFFFFFFFFFFFFFFFE),
    # UD
    vec("ud_send_only_v4", False, bthf(0x64, 0x000001, 0x000700, pkey=0x8001),
        deth=dict(qkey=0x80010000, src_qpn=0x000123), payload=pattern(256, 19)),
    vec("ud_send_only_imm_v6", True, bthf(0x65, 0x000001, 0x000701, se=1),
        deth=dict(qkey=0x11111111, src_qpn=0xFFFFFF), imm=0x7, payload=pattern(2, 20)),
    # Congestion marks: IP ECN CE, BTH FECN; variant fields must not matter.
    vec("rc_write_middle_fecn_v4", False, bthf(0x07, 0x000044, 0x000306, fecn=1),
        header=dict(tos=0x03, ttl=1), payload=pattern(4, 21)),
    vec("rc_send_middle_fecn_v6", True, bthf(0x01, 0x000011, 0x000104, fecn=1, migreq=0),
        header=dict(tos=0xFF, ttl=255, flow_label=0xFFFFF), payload=pattern(12, 22)),
    # softnic's extensions: out-of-order placement (PETH on SENDs, a RETH
    # on every WRITE packet whose DMA length counts the message's bytes up
    # to the packet's end, RWSNETH) and the IRN NACK. FIRST and MIDDLE
    # payloads are cut short to 64 bytes; a MIDDLE's DMA length is its
    # offset (4096) plus its payload.
    vec("rc_send_first_ooo_v4", False, bthf(0xC0, 0x000011, 0x000800),
        peth=dict(recv_sn=0x000000, index=0), payload=pattern(64, 23)),
    vec("rc_send_middle_ooo_v6", True, bthf(0xC1, 0x000011, 0x000801),
        peth=dict(recv_sn=0xABCDEF, index=1), payload=pattern(64, 24)),
    vec("rc_send_last_imm_ooo_v4", False, bthf(0xC3, 0x000011, 0x000802, ackreq=1),
        imm=0xDEADBEEF, peth=dict(recv_sn=0xFFFFFF, index=0x123456), payload=pattern(13, 25)),
    vec("rc_send_only_ooo_v6", True, bthf(0xC4, 0x000011, 0xFFFFFF, ackreq=1),
        peth=dict(recv_sn=7, index=0), payload=pattern(5, 26)),
    vec("rc_write_first_ooo_v6", True, bthf(0xC6, 0x000044, 0x000900),
        reth=dict(va=0x00007F0012345000, rkey=0x1234, dmalen=8253), payload=pattern(64, 33)),
    vec("rc_write_middle_ooo_v4", False, bthf(0xC7, 0x000044, 0x000901),
        reth=dict(va=0x00007F0012345000, rkey=0x1234, dmalen=4160), payload=pattern(64, 27)),
    vec("rc_write_last_ooo_v6", True, bthf(0xC8, 0x000044, 0x000902, ackreq=1),
        reth=dict(va=0x00007F0012345000, rkey=0x1234, dmalen=8253), payload=pattern(61, 28)),
    vec("rc_write_last_imm_ooo_v4", False, bthf(0xC9, 0x000044, 0x000903, ackreq=1),
        reth=dict(va=0x1000, rkey=0x55AA55AA, dmalen=2080), imm=0x0000002A,
        rwsn=0x000102, payload=pattern(32, 29)),
    vec("rc_write_only_imm_ooo_v6", True, bthf(0xCB, 0x000044, 0x000904, se=1, ackreq=1),
        reth=dict(va=0xFFFFFFFFFFFFFFF0, rkey=0xFEDCBA98, dmalen=3), imm=0xCAFEF00D,
        rwsn=0xFEDCBA, payload=pattern(3, 30)),
    vec("rc_ack_sack_v4", False, bthf(0xD1, 0x000077, 0x000A00),
        aeth=dict(syndrome=nak(0), msn=0x000045), sack=0x000A07),
    vec("rc_ack_sack_wrap_v6", True, bthf(0xD1, 0x000077, 0xFFFFFE),
        aeth=dict(syndrome=nak(0), msn=0xFFFFFF), sack=0x000001),
    # FaSR: a SACK with lost-cnt 3, one whose lost-cnt overflowed, an FNACK.
    vec("rc_ack_sack_lostcnt_v4", False, bthf(0xD1, 0x000077, 0x000B00),
        aeth=dict(syndrome=nak(0), msn=0x000046), sack=0x03000B05),
    vec("rc_ack_sack_overflow_v6", True, bthf(0xD2, 0x000077, 0x000B00),
        aeth=dict(syndrome=nak(0), msn=0x000046), sack=0x07000B40),
    vec("rc_ack_fnak_v4", False, bthf(0xD3, 0x000077, 0xFFFFFF),
        aeth=dict(syndrome=nak(0), msn=0x000047), sack=0x000003),
    # MELO: RCV.NXT 0xC00, RCV.HIGH 0xC20, holes 0xC18 (2), 0xC08 (5), 0xC00 (3).
    vec("rc_ack_holes_v4", False, bthf(0xD4, 0x000077, 0x000C00),
        aeth=dict(syndrome=nak(0), msn=0x000048), holes=dict(high=0x000C20, holes=[(0x18, 2), (0x08, 5), (0, 3)])),
    vec("rc_ack_holes_wrap_v6", True, bthf(0xD4, 0x000077, 0xFFFFF0),
        aeth=dict(syndrome=nak(0), msn=0x000049), holes=dict(high=0x000004, holes=[(0x10, 4), (0, 1), (0, 0)])),
    # StaR's stateless mode: the server (QP 0x201) READs 8253 bytes from
    # the client (QP 0x101) into 0x7F0000100000: a WQEP, its EA, the last
    # of nine 1024-byte RDPs (PSNs 0x10-0x18) and its RA, an RA refusing an
    # RDP, the CQEP; then the client gets 3000 bytes the server SENDs with a
    # GD, answered by three SDPs (PSNs 0x20-0x22), the last of them here.
    # RDPs and GDs name the client's QP in the BTH, where the answers go.
    vec("star_wqep_read_v4", False, bthf(0xE0, 0x000101, 0),
        wqep=dict(driver_seq=1, kind=5, flags=0x01, wrid=0x0000000000000A01,
                  local_va=0x00007F0000100000, local_key=0x00001001, length=8253,
                  remote_va=0x00007F5500200000, remote_key=0x00002002, imm=0)),
    vec("star_ea_wqep_v6", True, bthf(0xE2, 0x000201, 0), ea=dict(kind=0, driver_seq=1)),
    vec("star_rdp_last_v6", True, bthf(0xE3, 0x000101, 0x000018, ackreq=1),
        rdp=dict(va=0x00007F0000102000, rkey=0x00001001, flags=0x01),
        payload=pattern(61, 31)),
    vec("star_ra_v4", False, bthf(0xE4, 0x000101, 0x000018),
        aeth=dict(syndrome=ack(0x1F), msn=0)),
    vec("star_ra_nak_remote_access_v6", True, bthf(0xE4, 0x000101, 0x000031),
        aeth=dict(syndrome=nak(2), msn=0)),
    vec("star_cqep_v4", False, bthf(0xE1, 0x000201, 0),
        cqep=dict(driver_seq=1, status=0, opcode=2, flags=0, byte_len=8253, imm=0)),
    vec("star_gd_v6", True, bthf(0xE5, 0x000101, 0x000020),
        gd=dict(va=0x00007F0000300000, rkey=0x00003003, length=3000, mtu=3, flags=0)),
    vec("star_sdp_v4", False, bthf(0xE6, 0x000101, 0x000022),
        sdp=dict(offset=2048), payload=pattern(952, 32)),
]


def check_tshark(frames):
    """Decode the frames with tshark and compare what it sees. Only the
    standard opcodes: Wireshark does not know softnic's extensions."""
    standard = [(v, f) for v, f in zip(VECTORS, frames, strict=True)
                if v["bth"]["opcode"] < 0xC0]
    vectors = [v for v, _ in standard]
    frames = [f for _, f in standard]
    from scapy.utils import wrpcap
    fields = ["infiniband.bth.opcode", "infiniband.bth.destqp",
              "infiniband.bth.psn", "infiniband.aeth.msn",
              "infiniband.reth.dmalen", "infiniband.deth.srcqp",
              "ip.checksum.status", "udp.checksum.status"]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "golden.pcap")
        wrpcap(path, [Ether(f) for f in frames])
        cmd = ["tshark", "-o", "ip.check_checksum:TRUE",
               "-o", "udp.check_checksum:TRUE", "-r", path,
               "-T", "fields", "-E", "separator=,"]
        for f in fields:
            cmd += ["-e", f]
        rows = subprocess.run(cmd, check=True, capture_output=True,
                              text=True).stdout.splitlines()
    good = "1"  # Wireshark's PROTO_CHECKSUM_E_GOOD
    for v, row in zip(vectors, rows, strict=True):
        opcode, qpn, psn, msn, dmalen, srcqp, ipsum, udpsum = row.split(",")
        want = [(int(opcode), v["bth"]["opcode"]), (int(qpn, 0), v["bth"]["dqpn"]),
                (int(psn), v["bth"]["psn"])]
        if "aeth" in v:
            want.append((int(msn), v["aeth"]["msn"]))
        if "reth" in v:
            want.append((int(dmalen), v["reth"]["dmalen"]))
        if "deth" in v:
            want.append((int(srcqp, 0), v["deth"]["src_qpn"]))
        want.append((udpsum if v["ipv6"] else ipsum, good))
        for got, exp in want:
            if got != exp:
                sys.exit("tshark: %s: got %r, want %r (%s)" % (v["name"], got, exp, row))
    print("tshark agrees on all %d standard vectors" % len(vectors))


def main():
    frames = [build(v) for v in VECTORS]
    if "--tshark" in sys.argv:
        check_tshark(frames)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden.json")
    with open(out, "w") as f:
        json.dump(VECTORS, f, indent=1)
        f.write("\n")
    print("wrote %d vectors to %s" % (len(VECTORS), out))


if __name__ == "__main__":
    main()
