package main

import (
	"log/slog"

	"golang.org/x/sys/unix"
)

// mtu4096Frame is the largest frame a daemon run with --mtu 4096 carries:
// the path MTU plus room for every header a RoCE packet can carry
// (Ethernet, a VLAN tag, IPv6, UDP, BTH, the largest extension headers,
// ICRC) with some to spare.
const mtu4096Frame = 4096 + 256

// mtuFrameNeed is the frame a path MTU's full packets need under gbn over
// IPv6: Ethernet, IPv6, UDP, BTH, RETH, ImmDt and ICRC around a full
// payload (an RDMA WRITE ONLY with immediate; docs/deploy.md's table).
func mtuFrameNeed(mtu int) int { return mtu + 14 + 40 + 8 + 12 + 16 + 4 + 4 }

// portFrames gives the UMEM chunk size and the largest frame for --mtu:
// path MTU 1024 in 2048-byte chunks, 2048 in 4096-byte ones, each frame in
// one chunk less its receive headroom; 4096 in 4096-byte chunks with
// frames of two (AF_XDP multi-buffer). The UDP port takes the same frame
// limit, so that --mtu means the same on either port.
func portFrames(mtu int) (frameSize, maxFrame int) {
	switch mtu {
	case 1024:
		return 2048, 2048 - unix.XDP_PACKET_HEADROOM
	case 2048:
		return 4096, 4096 - unix.XDP_PACKET_HEADROOM
	}
	return 4096, mtu4096Frame
}

// warnSmallMTU logs when the interface's MTU keeps the port's frames
// below what --mtu's packets need: QPs that use that path MTU would send
// frames the port cannot carry.
func warnSmallMTU(log *slog.Logger, o options, maxFrame int) {
	if need := mtuFrameNeed(o.mtu); maxFrame < need {
		log.Warn("the interface MTU is too small for --mtu", "iface", o.iface, "mtu", o.mtu,
			"max_frame", maxFrame, "need_frame", need, "need_iface_mtu", need-14)
	}
}

// switchMaxFrame is the frame limit of a switch port on an interface of
// the given MTU: frames as large as the MTU allows, at least what one
// 4096-byte chunk holds (as before multi-buffer); beyond a chunk (path MTU
// 4096 on a 4500-byte MTU) they cross AF_XDP in several, up to the 18
// chunks a frame may take.
func switchMaxFrame(ifaceMTU int) int {
	chunk := 4096 - unix.XDP_PACKET_HEADROOM
	return max(chunk, min(ifaceMTU+14, 18*chunk))
}
