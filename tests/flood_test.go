//go:build linux

package tests

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/tests/netns"
)

// The flood test throws malformed and unwanted RoCEv2 packets at a running
// daemon from the other host of the testbed and holds the daemon to
// STYLE.md item 5: no input from the wire can crash it, and every frame it
// drops is counted under exactly one reason. The frames are sent with
// B's kernel UDP stack (the kernel writes Ethernet, IP and UDP; the test
// writes the UDP payload, BTH through ICRC), so they cross the switch and
// the XDP steering program like any peer's frames would.

// floodSeed makes the random probes the same in every run, so a failure
// can be replayed.
const floodSeed = 0x50f7_71c5

// floodBurst is how many probes go out before the test waits for the
// daemon to have taken all of them. The AF_XDP RX ring holds 2048 frames
// and a veth backlog 1000, so bursts of this size are never dropped on the
// way for lack of room, which keeps the expected counts exact. The storm
// phase then sends without pause.
const floodBurst = 128

// floodMTU is the daemon's --mtu: UMEM chunks of 2*floodMTU bytes, of
// which XDP_PACKET_HEADROOM is in front of every received frame.
const floodMTU = 1024

// chunkRoom is the largest frame an AF_XDP socket of the daemon receives;
// the kernel drops longer ones at the socket and counts them in
// XDP_STATISTICS rx_dropped (port_rx_dropped).
const chunkRoom = 2*floodMTU - unix.XDP_PACKET_HEADROOM

// dropReason is where the daemon must count a probe. The engine checks a
// frame in rxe_recv.c's order: parse, ICRC, P_Key, QPN; the first check
// that fails decides. With no client, no QP exists, so a frame that
// passes the first three is dropped for its unknown QPN, but a CNP, which
// names no QP the engine acts for, is counted as one and ignored.
type dropReason int

const (
	dropMalformed dropReason = iota
	dropICRC
	dropPKey
	dropUnknownQPN
	dropCNP    // a RoCEv2 CNP: counted (mlx5's rp_cnp_ignored), no reaction
	dropTooBig // never reaches the engine: longer than a UMEM chunk
	numDropReasons
)

// counterOf names each reason's counter in `softnic stats`.
var counterOf = [numDropReasons]string{
	dropMalformed:  "rcvd_malformed",
	dropICRC:       "rcvd_icrc_err",
	dropPKey:       "rcvd_pkey_err",
	dropUnknownQPN: "rcvd_unknown_qpn",
	dropCNP:        "rp_cnp_ignored",
	dropTooBig:     "port_rx_dropped",
}

func (r dropReason) String() string { return counterOf[r] }

// quietCounters must not move during the flood: the daemon answers none
// of these frames (a packet that fails the header checks is dropped
// without a response, as rxe_recv.c does; in particular no ACK or NAK
// goes to a QP that does not exist) and no frame gets past the QPN check.
var quietCounters = []string{
	"sent_pkts", "acks_sent", "seq_nak_sent", "duplicate_request", "out_of_seq_request",
	"rdma_recvs", "resp_remote_access_errors", "resp_remote_invalid_request",
	"rcvd_bad_addr", "rcvd_bad_state", "rcvd_bad_opcode", "rcvd_bad_response", "rcvd_stale_ack",
	"port_tx_frames",
}

// probe is one UDP payload to send and where the daemon must count it.
type probe struct {
	name string
	roce []byte // the UDP payload: BTH .. ICRC, or whatever is being tried
	want dropReason
}

// wire builds frames exactly as host B's kernel will put them on the
// wire towards A, so that ICRCs computed here hold at A. The ICRC masks
// what the kernel may choose on its own (TOS, TTL, flow label, UDP
// checksum); IPv4's identification is not masked, and the kernel writes 0
// there for a datagram with DF set from an unconnected socket
// (ip_select_ident), which is what FrameHeader.Encode writes too. The
// socket sets IP_PMTUDISC_DO so that DF is set.
type wire struct {
	hdr bth.FrameHeader
}

// frame returns roce behind the Ethernet, IP and UDP headers.
func (w *wire) frame(roce []byte) []byte {
	f := make([]byte, w.hdr.Len()+len(roce))
	off := w.hdr.Encode(f, len(roce))
	copy(f[off:], roce)
	return f
}

// seal writes roce's ICRC (its last four bytes) as A will compute it.
func (w *wire) seal(roce []byte) []byte {
	f := w.frame(roce)
	bth.FinishFrame(f, &w.hdr)
	copy(roce, f[w.hdr.Len():])
	return roce
}

// classify is the engine's receive check order applied to the frame A
// will receive: the expected drop reason of any payload.
func (w *wire) classify(roce []byte) dropReason {
	f := w.frame(roce)
	if len(f) > chunkRoom {
		return dropTooBig
	}
	fr, err := bth.ParseFrame(f)
	switch {
	case err != nil:
		return dropMalformed
	case !fr.VerifyICRC():
		return dropICRC
	}
	// Full and limited membership of the default partition.
	if pk := fr.Pkt.BTH().PKey(); pk != 0xffff && pk != 0x7fff {
		return dropPKey
	}
	if fr.Pkt.Opcode() == bth.CNP {
		return dropCNP
	}
	return dropUnknownQPN
}

// packet is a well-formed packet of op with payloadLen bytes of payload,
// the extension headers zero, its pad set and its ICRC valid.
func (w *wire) packet(op bth.Opcode, qpn, psn uint32, payloadLen int, rng *rand.Rand) []byte {
	info := bth.Lookup(op)
	if info.Flags&bth.HasPayload == 0 {
		payloadLen = 0
	}
	pad := bth.PadFor(payloadLen)
	p := make([]byte, info.PacketLen(payloadLen))
	bth.BTH(p).Encode(&bth.BTHFields{Opcode: op, PadCount: uint8(pad), PKey: 0xffff, DestQPN: qpn, PSN: psn, AckReq: true})
	for i := info.Length; i < info.Length+payloadLen; i++ {
		p[i] = byte(rng.Uint32())
	}
	return w.seal(p)
}

// knownOpcodes are the opcodes softnic parses.
func knownOpcodes() []bth.Opcode {
	var ops []bth.Opcode
	for op := range 256 {
		if bth.Lookup(bth.Opcode(op)) != nil {
			ops = append(ops, bth.Opcode(op))
		}
	}
	return ops
}

// floodProbes builds the probe set. Hand-made probes carry the reason the
// test's author expects; classify must agree (that checks the test, not
// the daemon: the daemon is checked against the counts).
func floodProbes(t *testing.T, w *wire, maxFrame int) []probe {
	t.Helper()
	rng := rand.New(rand.NewPCG(floodSeed, 0))
	var probes []probe
	add := func(want dropReason, roce []byte, format string, args ...any) {
		name := fmt.Sprintf(format, args...)
		if got := w.classify(roce); got != want {
			t.Fatalf("probe %s: built to be counted as %s, but the engine's check order gives %s", name, want, got)
		}
		probes = append(probes, probe{name: name, roce: roce, want: want})
	}
	qpn := func() uint32 { return 2 + rng.Uint32N(1<<24-2) }

	// Every opcode softnic knows, well formed, to a QP that does not
	// exist: the sequence position does not matter (a RC_SEND_MIDDLE or
	// READ_RESPONSE_LAST out of nowhere, an ACK for nothing), nor does
	// the transport (UD opcodes carry a DETH).
	for _, op := range knownOpcodes() {
		want := dropUnknownQPN
		if op == bth.CNP {
			want = dropCNP
		}
		for _, n := range []int{0, 1, 3, 256, 1024} {
			to := "to unknown QPN"
			if want == dropCNP {
				to = "(a CNP, no QP)"
			}
			add(want, w.packet(op, qpn(), rng.Uint32N(1<<24), n, rng), "%v payload %d %s", op, n, to)
		}
	}
	// Byte 4 of the BTH (FECN/BECN) is rewritten by switches and masked
	// out of the ICRC (Annex A17.4): marking it after sealing keeps the
	// ICRC valid.
	for _, op := range []bth.Opcode{bth.RCSendOnly, bth.RCWriteFirst, bth.RCAcknowledge} {
		p := w.packet(op, qpn(), 7, 64, rng)
		bth.BTH(p).SetFECN(true)
		bth.BTH(p).SetBECN(true)
		add(dropUnknownQPN, p, "%v with FECN/BECN set after the ICRC", op)
	}

	// Truncated: every prefix of a packet of each header layout. Shorter
	// than its headers plus ICRC, or than its pad, it does not parse;
	// otherwise it parses and its ICRC, computed over the whole packet,
	// no longer matches.
	for _, op := range []bth.Opcode{bth.RCSendOnly, bth.RCSendOnlyImm, bth.RCWriteOnlyImm, bth.RCReadRequest,
		bth.RCCompareSwap, bth.RCAtomicAcknowledge, bth.RCReadResponseFirst, bth.UDSendOnly, bth.RCSendOnlyInv} {
		info := bth.Lookup(op)
		full := w.packet(op, qpn(), 1, 61, rng) // 61: a pad of 3
		pad := int(bth.BTH(full).PadCount())
		for n := range len(full) {
			want := dropICRC
			switch payload := n - info.Length - bth.ICRCLen; {
			case n < info.Length+bth.ICRCLen:
				want = dropMalformed
			case info.Flags&bth.HasPayload == 0:
				want = dropMalformed // no payload allowed, and n is not the full length
			case payload < pad:
				want = dropMalformed
			}
			add(want, slices.Clone(full[:n]), "%v truncated to %d of %d bytes", op, n, len(full))
		}
	}

	// A wrong ICRC: a bit flipped in the ICRC itself, or in the payload
	// after sealing.
	for i, op := range knownOpcodes() {
		p := w.packet(op, qpn(), 9, 100, rng)
		if info := bth.Lookup(op); info.Flags&bth.HasPayload != 0 && i%2 == 0 {
			p[info.Length+rng.IntN(100)] ^= 1 << rng.UintN(8)
			add(dropICRC, p, "%v with a payload bit flipped", op)
			continue
		}
		p[len(p)-1-rng.IntN(4)] ^= 1 << rng.UintN(8)
		add(dropICRC, p, "%v with an ICRC bit flipped", op)
	}
	// The ICRC written big-endian instead of rxe's byte order.
	p := w.packet(bth.RCWriteOnly, qpn(), 3, 128, rng)
	icrc := p[len(p)-4:]
	icrc[0], icrc[1], icrc[2], icrc[3] = icrc[3], icrc[2], icrc[1], icrc[0]
	add(dropICRC, p, "RC_RDMA_WRITE_ONLY with a byte-swapped ICRC")

	// Opcodes softnic does not parse (UC, RD, reserved, vendor-specific,
	// CNP), sealed with a valid ICRC: malformed all the same.
	for op := range 256 {
		if bth.Lookup(bth.Opcode(op)) != nil || op%3 != 0 && op < 0xc0 {
			continue // a third of the reserved ones and all vendor ones
		}
		p := make([]byte, bth.BTHLen+64+bth.ICRCLen)
		bth.BTH(p).Encode(&bth.BTHFields{Opcode: bth.Opcode(op), PKey: 0xffff, DestQPN: qpn()})
		add(dropMalformed, w.seal(p), "opcode %#02x", op)
	}
	// A transport version other than 0 on an otherwise valid packet.
	for tver := uint8(1); tver < 16; tver++ {
		p := w.packet(bth.RCSendOnly, qpn(), 0, 32, rng)
		bth.BTH(p).SetTVer(tver)
		add(dropMalformed, w.seal(p), "RC_SEND_ONLY with TVer %d", tver)
	}
	// A pad count larger than the payload, and payload on an opcode that
	// has none.
	for n := range 3 {
		p := make([]byte, bth.BTHLen+n+bth.ICRCLen)
		bth.BTH(p).Encode(&bth.BTHFields{Opcode: bth.RCSendOnly, PadCount: 3, PKey: 0xffff, DestQPN: qpn()})
		add(dropMalformed, w.seal(p), "RC_SEND_ONLY with %d bytes after the BTH and pad 3", n)
	}
	for _, op := range []bth.Opcode{bth.RCAcknowledge, bth.RCReadRequest, bth.RCFetchAdd} {
		p := append(w.packet(op, qpn(), 0, 0, rng), 0, 0, 0, 0)
		add(dropMalformed, w.seal(p), "%v with 4 bytes of payload", op)
	}
	// A P_Key outside the default partition, with a valid ICRC.
	for _, pk := range []uint16{0x0000, 0x0001, 0x1234, 0x7ffe, 0x8001, 0xfffe} {
		p := w.packet(bth.RCSendOnly, qpn(), 0, 16, rng)
		bth.BTH(p).SetPKey(pk)
		add(dropPKey, w.seal(p), "RC_SEND_ONLY with P_Key %#04x", pk)
	}

	// Random probes: pure garbage; a plausible BTH in front of garbage;
	// valid packets with one random byte changed. The engine's check
	// order (classify) says where each must be counted: a changed byte
	// may leave the packet valid (the same value again, or BTH byte 4,
	// which the ICRC masks), so the split between reasons depends on the
	// source port the ICRC covers and differs a little between runs.
	ops := knownOpcodes()
	for i := range 600 {
		var p []byte
		switch i % 3 {
		case 0:
			p = make([]byte, rng.IntN(1500))
			for j := range p {
				p[j] = byte(rng.Uint32())
			}
		case 1:
			p = make([]byte, bth.BTHLen+rng.IntN(300))
			for j := range p {
				p[j] = byte(rng.Uint32())
			}
			bth.BTH(p).Encode(&bth.BTHFields{Opcode: ops[rng.IntN(len(ops))], PKey: 0xffff, DestQPN: qpn()})
		case 2:
			p = w.packet(ops[rng.IntN(len(ops))], qpn(), rng.Uint32N(1<<24), rng.IntN(1100), rng)
			p[rng.IntN(len(p))] = byte(rng.Uint32())
		}
		probes = append(probes, probe{name: fmt.Sprintf("random probe %d", i), roce: p, want: w.classify(p)})
	}

	// Longer than a UMEM chunk: the kernel drops it at the AF_XDP
	// socket, before the engine, and counts it there. Only when the
	// testbed's MTU lets such a frame through (maxFrame: B's Ethernet
	// frames).
	writeHdr := bth.Lookup(bth.RCWriteOnly).Length + bth.ICRCLen
	for _, size := range []int{chunkRoom + 4, (chunkRoom + maxFrame) / 2, maxFrame} {
		payload := (size - w.hdr.Len() - writeHdr) &^ 3 // no pad: the frame is exactly this long
		if w.hdr.Len()+writeHdr+payload <= chunkRoom {
			continue
		}
		add(dropTooBig, w.packet(bth.RCWriteOnly, qpn(), 0, payload, rng),
			"RC_RDMA_WRITE_ONLY in a %d-byte frame, longer than a UMEM chunk", w.hdr.Len()+writeHdr+payload)
	}
	return probes
}

// TestFloodMalformed starts a daemon on A, floods it from B with malformed
// and unwanted RoCEv2 frames, over IPv4 and over IPv6 (a daemon serves
// one address; the XDP program steers only frames to it), and checks that
// the daemon survived, counted each frame under the expected reason,
// answered none, and still shuts down cleanly.
func TestFloodMalformed(t *testing.T) {
	tb := requireDaemon(t)
	for _, fam := range []struct {
		name     string
		dst, src netip.Addr
	}{
		{"IPv4", tb.A.IPv4, tb.B.IPv4},
		{"IPv6", tb.A.IPv6, tb.B.IPv6},
	} {
		t.Run(fam.name, func(t *testing.T) { floodFamily(t, tb, fam.dst, fam.src) })
	}
}

func floodFamily(t *testing.T, tb *netns.Testbed, dst, src netip.Addr) {
	socket := filepath.Join(t.TempDir(), "softnic.sock")
	d := startDaemon(t, tb, netns.HostA, "--iface", tb.A.Iface, "--ip", dst.String(), "--mtu", fmt.Sprint(floodMTU),
		"--socket", socket, "--metrics", "")
	base := parseStats(t, d.waitReady(socket))

	conn := floodSocket(t, tb, src)
	to := netip.AddrPortFrom(dst, bth.UDPPort)
	w := &wire{hdr: bth.FrameHeader{Src: src, Dst: dst, SrcPort: uint16(conn.LocalAddr().(*net.UDPAddr).Port)}}
	// B's interface sends Ethernet frames of up to its MTU plus the
	// Ethernet header.
	probes := floodProbes(t, w, tb.MTU+14)

	// Exact phase: bursts the daemon can take without any drop on the
	// way, so that every counter must match the probes to the frame.
	var want [numDropReasons]uint64
	for start := 0; start < len(probes); start += floodBurst {
		burst := probes[start:min(start+floodBurst, len(probes))]
		for _, p := range burst {
			if _, err := conn.WriteToUDPAddrPort(p.roce, to); err != nil {
				t.Fatalf("send %s: %v", p.name, err)
			}
			want[p.want]++
		}
		sent := uint64(start + len(burst))
		waitStats(t, d, socket, base, func(delta map[string]uint64) bool {
			return delta["xdp_steered"] == sent &&
				delta["port_rx_frames"]+delta["port_rx_dropped"] == sent &&
				delta["rcvd_pkts"]+delta["rcvd_malformed"] == delta["port_rx_frames"]
		})
	}
	delta := statsDelta(base, parseStats(t, mustStats(t, socket)))
	t.Logf("%d probes: %d malformed, %d bad ICRC, %d bad P_Key, %d unknown QPN, %d longer than a UMEM chunk",
		len(probes), want[dropMalformed], want[dropICRC], want[dropPKey], want[dropUnknownQPN], want[dropTooBig])
	expect := map[string]uint64{
		"xdp_steered":    uint64(len(probes)),
		"port_rx_frames": uint64(len(probes)) - want[dropTooBig],
		"rcvd_pkts":      want[dropICRC] + want[dropPKey] + want[dropUnknownQPN] + want[dropCNP],
	}
	for r, n := range want {
		expect[counterOf[r]] = n
	}
	for _, name := range quietCounters {
		expect[name] = 0
	}
	for name, n := range expect {
		if got, ok := delta[name]; !ok {
			t.Errorf("softnic stats has no counter %s", name)
		} else if got != n {
			t.Errorf("%s: daemon counted %d, the probes make %d", name, got, n)
		}
	}
	if t.Failed() {
		// Name the probes of each reason, so a miscount points at a
		// frame the daemon treats differently from the spec.
		for r := range numDropReasons {
			var names []string
			for _, p := range probes {
				if p.want == r && !strings.HasPrefix(p.name, "random") {
					names = append(names, p.name)
				}
			}
			t.Logf("probes for %s (%d, random ones not listed): %s", dropReason(r), want[r], strings.Join(names[:min(len(names), 40)], "; "))
		}
	}

	// Storm phase: the same probes, over and over, as fast as B's
	// kernel sends them. Frames may now be dropped on the way or at a
	// full RX ring; what must hold is that the daemon survives, answers
	// nothing, and accounts for every frame the XDP program steered to
	// it: taken by the engine or dropped by the kernel at the socket,
	// each reason counted once.
	base = parseStats(t, mustStats(t, socket))
	const storm = 100000
	began := time.Now()
	for i := range storm {
		if _, err := conn.WriteToUDPAddrPort(probes[i%len(probes)].roce, to); err != nil {
			t.Fatalf("storm send %d: %v", i, err)
		}
	}
	elapsed := time.Since(began)
	var settled map[string]uint64
	lastSteered := ^uint64(0)
	waitStats(t, d, socket, base, func(delta map[string]uint64) bool {
		settled = delta
		// The counters are read one after the other while frames may
		// still be arriving; they are judged once no frame came in
		// between two reads.
		quiet := delta["xdp_steered"] == lastSteered
		lastSteered = delta["xdp_steered"]
		// The kernel counts a frame dropped for want of a fill-ring
		// buffer in rx_dropped too (rx_fill_ring_empty_descs only says
		// how often that happened), so it is not added again.
		socketDrops := delta["port_rx_dropped"] + delta["port_rx_ring_full"]
		engineDrops := delta["rcvd_icrc_err"] + delta["rcvd_pkey_err"] + delta["rcvd_unknown_qpn"] + delta["rp_cnp_ignored"]
		return quiet && delta["xdp_steered"] > 0 && delta["xdp_steered"] <= storm &&
			delta["port_rx_frames"]+socketDrops == delta["xdp_steered"] &&
			delta["rcvd_pkts"]+delta["rcvd_malformed"] == delta["port_rx_frames"] &&
			engineDrops == delta["rcvd_pkts"]
	})
	t.Logf("storm: %d frames sent in %v; %d steered to the daemon, %d taken by the engine, %d dropped at a full RX ring, %d too big",
		storm, elapsed.Round(time.Millisecond), settled["xdp_steered"], settled["port_rx_frames"], settled["port_rx_ring_full"], settled["port_rx_dropped"])
	for _, name := range quietCounters {
		if settled[name] != 0 {
			t.Errorf("storm: %s moved by %d; the daemon must not answer or accept any of these frames", name, settled[name])
		}
	}

	// Still alive and answering, and it shuts down as usual.
	select {
	case <-d.exited:
		t.Fatalf("the daemon exited during the flood: %v\n%s", d.err, d.out.String())
	default:
	}
	mustStats(t, socket)
	if err := d.signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM after the flood: daemon exited with %v, want 0\n%s", err, d.out.String())
	}
	if x := xdpOn(t, tb, netns.HostA, tb.A.Iface); x != "" {
		t.Errorf("XDP program left on %s after SIGTERM: %s", tb.A.Iface, x)
	}
}

// floodSocket opens the sending socket in B, bound to src so that the
// source address and port are the ones the ICRCs are computed over. For
// IPv4 it sets IP_PMTUDISC_DO: DF set, so the kernel writes IP ID 0
// (see wire).
func floodSocket(t *testing.T, tb *netns.Testbed, src netip.Addr) *net.UDPConn {
	t.Helper()
	var conn *net.UDPConn
	err := tb.Do(netns.HostB, func() error {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)))
		if err != nil {
			return err
		}
		if src.Is4() {
			rc, err := c.SyscallConn()
			if err == nil {
				var serr error
				err = rc.Control(func(fd uintptr) {
					serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
				})
				if err == nil {
					err = serr
				}
			}
			if err != nil {
				c.Close()
				return fmt.Errorf("IP_MTU_DISCOVER: %w", err)
			}
		}
		// Room for a whole burst, so that sends do not block on it.
		c.SetWriteBuffer(4 << 20)
		conn = c
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// parseStats reads `softnic stats` output into a map.
func parseStats(t *testing.T, out string) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var name string
		var v uint64
		if _, err := fmt.Sscanf(l, "%s %d", &name, &v); err != nil {
			t.Fatalf("softnic stats line %q: %v", l, err)
		}
		m[name] = v
	}
	return m
}

// mustStats is `softnic stats`, failing the test if the daemon does not
// answer.
func mustStats(t *testing.T, socket string) string {
	t.Helper()
	out, err := stats(t, socket)
	if err != nil {
		t.Fatalf("softnic stats: %v\n%s", err, out)
	}
	return out
}

// statsDelta is now - base for every counter of now. Counters that can go
// down (gauges such as qpc_resident) wrap around; the tests only look at
// counters.
func statsDelta(base, now map[string]uint64) map[string]uint64 {
	d := make(map[string]uint64, len(now))
	for name, v := range now {
		d[name] = v - base[name]
	}
	return d
}

// waitStats polls the daemon's counters until done holds for their change
// since base. The bound is generous (a loaded 2-core machine runs the
// tests in parallel); reaching it is a failure that shows the counters.
func waitStats(t *testing.T, d *daemonProc, socket string, base map[string]uint64, done func(delta map[string]uint64) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-d.exited:
			t.Fatalf("the daemon exited: %v\n%s", d.err, d.out.String())
		default:
		}
		out := mustStats(t, socket)
		delta := statsDelta(base, parseStats(t, out))
		if done(delta) {
			return
		}
		if time.Now().After(deadline) {
			var lines []string
			for _, name := range slices.Sorted(maps.Keys(delta)) {
				if delta[name] != 0 {
					lines = append(lines, fmt.Sprintf("%s +%d", name, delta[name]))
				}
			}
			t.Fatalf("counters did not reach the expected state within 20 s; changes:\n%s", strings.Join(lines, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
