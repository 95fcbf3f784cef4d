package perftest

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/verbs/cm"
)

func rawFrame(v6 bool) RawFrame {
	h := bth.FrameHeader{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("198.18.0.1"), Dst: netip.MustParseAddr("198.18.1.1")}
	if v6 {
		h.Src, h.Dst = netip.MustParseAddr("2001:db8:a::1"), netip.MustParseAddr("2001:db8:b::1")
	}
	return RawFrame{Header: h, DestQPN: 0xFFFFF0, Payload: 1024}
}

// TestRawFrameValid checks that raw frames are RoCEv2 frames any receiver
// (and Wireshark) accepts: they parse, and their ICRC is right.
func TestRawFrameValid(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, payload := range []int{0, 1, 1023, 1024} {
			f := rawFrame(v6)
			f.Payload = payload
			buf := make([]byte, 2048)
			n := f.Build(buf, 0x123456)
			fr, err := bth.ParseFrame(buf[:n])
			if err != nil {
				t.Fatalf("v6 %v payload %d: %v", v6, payload, err)
			}
			h := fr.Pkt.BTH()
			if !fr.VerifyICRC() || fr.Pkt.Opcode() != bth.RCSendOnly || h.DestQPN() != 0xFFFFF0 || h.PSN() != 0x123456 ||
				len(fr.Pkt.Payload()) != payload || fr.IPv6 != v6 || fr.SrcPort() != rawSrcPort {
				t.Fatalf("v6 %v payload %d: bad frame %+v", v6, payload, h.Fields())
			}
		}
	}
	f := rawFrame(false)
	if f.Build(make([]byte, 100), 0) != 0 {
		t.Fatal("a frame longer than the buffer was built")
	}
}

// TestRawSendReceive blasts frames into the in-memory fabric and counts
// them on the other port: every one arrives, valid, with its own PSN.
func TestRawSendReceive(t *testing.T) {
	clock := &fabric.FakeClock{}
	fab := fabric.New(clock, 1, fabric.LinkConfig{QueueFrames: 1000}, fabric.LinkConfig{}, 2048)
	sent, err := RawSend(context.Background(), RawPort{Port: fab.A()}, rawFrame(false), 0, 700)
	if err != nil {
		t.Fatal(err)
	}
	if sent.Frames != 700 || sent.Bytes != 700*1082 || sent.Gbps() <= 0 || sent.Mpps() <= 0 {
		t.Fatalf("sent %+v", sent)
	}
	// The fabric also stands in for a full TX ring: a second burst beyond
	// its 1000 frames must stop, not spin, when the deadline passes.
	more, err := RawSend(context.Background(), RawPort{Port: fab.A()}, rawFrame(false), 20*time.Millisecond, 0)
	if err != nil || more.Frames != 300 {
		t.Fatalf("second burst %+v %v", more, err)
	}
	seen := map[uint32]bool{}
	total := 0
	frames := make([][]byte, 64)
	port := fab.B()
	for {
		n := port.Receive(frames)
		if n == 0 {
			break
		}
		for _, b := range frames[:n] {
			fr, err := bth.ParseFrame(b)
			if err != nil || !fr.VerifyICRC() {
				t.Fatalf("received an invalid frame: %v", err)
			}
			seen[fr.Pkt.BTH().PSN()] = true
			total++
		}
	}
	// Each run numbers its frames from 1.
	if total != 1000 || len(seen) != 700 {
		t.Fatalf("%d frames with %d distinct PSNs, want 1000 and 700", total, len(seen))
	}
}

// loopPort is a goroutine-safe in-memory port: what one side transmits
// the other receives. The fabric belongs to one goroutine; the raw
// client and server each run their own.
type loopPort struct {
	q     *[][]byte // frames towards this port
	peerQ *[][]byte // frames towards the peer
	tx    []byte
}

func newLoopPair() (*loopPort, *loopPort) {
	var ab, ba [][]byte
	return &loopPort{q: &ba, peerQ: &ab}, &loopPort{q: &ab, peerQ: &ba}
}

var loopMu sync.Mutex // guards both queues of a pair

func (p *loopPort) Receive(frames [][]byte) int {
	loopMu.Lock()
	defer loopMu.Unlock()
	n := copy(frames, *p.q)
	*p.q = (*p.q)[n:]
	return n
}

func (p *loopPort) TxBuffer() []byte {
	loopMu.Lock()
	defer loopMu.Unlock()
	if len(*p.peerQ) >= 4096 {
		return nil
	}
	p.tx = make([]byte, 2048)
	return p.tx
}

func (p *loopPort) Transmit(n int) {
	loopMu.Lock()
	defer loopMu.Unlock()
	*p.peerQ = append(*p.peerQ, p.tx[:n])
}

func (p *loopPort) Flush()        {}
func (p *loopPort) MaxFrame() int { return 2048 }

func TestRawClientServer(t *testing.T) {
	a, b := newLoopPair()
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	var srv RawResult
	var srvErr error
	var wg sync.WaitGroup
	seconds := 0
	wg.Go(func() {
		srv, srvErr = RawServer(context.Background(), RawPort{Port: b}, c2, func(RawStats) { seconds++ })
	})
	cl, err := RawClient(context.Background(), RawPort{Port: a}, c1, rawFrame(true), 30*time.Millisecond)
	wg.Wait()
	if err != nil || srvErr != nil {
		t.Fatal(err, srvErr)
	}
	if cl.Sent.Frames == 0 || cl.Received.Frames != cl.Sent.Frames || srv != cl {
		t.Fatalf("client %+v, server %+v", cl, srv)
	}

	// A raw server facing a verbs client says so instead of counting.
	c3, c4 := net.Pipe()
	defer c3.Close()
	defer c4.Close()
	go func() {
		_, _ = cm.Exchange(c3, []cm.Endpoint{{QPN: 0x10, GID: netip.MustParseAddr("198.18.0.1")}})
	}()
	if _, err := RawServer(context.Background(), RawPort{Port: b}, c4, nil); err == nil || !strings.Contains(err.Error(), "endpoints") {
		t.Fatalf("raw server against a verbs client: %v", err)
	}
}
