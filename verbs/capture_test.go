package verbs

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/internal/capture"
)

// capturePair is two connected QPs, one on each daemon, and a capture
// context on A's daemon.
func capturePair(t *testing.T) (*daemons, *side, *side, *Context) {
	d := startDaemons(t, sim.Config{Seed: 5}, true)
	var sides [2]*side
	for i, sock := range []string{d.sockA, d.sockB} {
		ctx, err := Dial(sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ctx.Close() })
		if sides[i], err = newSide(ctx, 1<<20, 64, PSN(100*i)); err != nil {
			t.Fatal(err)
		}
	}
	ea, err := sides[0].endpoint()
	if err != nil {
		t.Fatal(err)
	}
	eb, err := sides[1].endpoint()
	if err != nil {
		t.Fatal(err)
	}
	if err := sides[0].connect(eb); err != nil {
		t.Fatal(err)
	}
	if err := sides[1].connect(ea); err != nil {
		t.Fatal(err)
	}
	cctx, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cctx.Close() })
	return d, sides[0], sides[1], cctx
}

func (s *side) write(t *testing.T, peer *side, id uint64, n int) {
	t.Helper()
	wr := SendWR{WRID: id, Opcode: WRRDMAWrite, Flags: SendSignaled, NumSGE: 1, RemoteAddr: peer.mr.Addr, RKey: peer.mr.RKey}
	wr.SGL[0] = SGE{Addr: s.mr.Addr, Length: uint32(n), LKey: s.mr.LKey}
	if err := s.qp.PostSend(wr); err != nil {
		t.Fatal(err)
	}
	if wc, err := waitWC(s.cq, 10*time.Second); err != nil || wc.Status != WCSuccess {
		t.Fatalf("write %d: %+v %v", id, wc, err)
	}
}

// TestCaptureDaemon: a capture on the daemon gets the NIC's frames,
// sealed and filtered, and its stop reports the counts; one capture per
// connection; after the stop the stream ends.
func TestCaptureDaemon(t *testing.T) {
	_, a, b, cctx := capturePair(t)
	cp, err := cctx.Capture(CaptureOptions{QPN: int64(b.qp.QPN()), Opcode: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cctx.Capture(CaptureOptions{QPN: -1, Opcode: -1}); !errors.Is(err, dataplane.ErrBusy) {
		t.Fatalf("second capture on one connection: %v, want ErrBusy", err)
	}
	const writes, size = 4, 4096 // 4 packets each at MTU 1024
	for i := uint64(1); i <= writes; i++ {
		a.write(t, b, i, size)
	}
	// A's QP and B's have the same number (each NIC numbers its own), so
	// the filter takes A's WRITEs to B and B's ACKs to A.
	for tx, i := 0, 0; tx < writes*4; i++ {
		rec, err := cp.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if rec.OrigLen != len(rec.Data) || time.Since(rec.Time) > time.Minute || time.Since(rec.Time) < 0 {
			t.Fatalf("record %d: %d of %d bytes, time %v", i, len(rec.Data), rec.OrigLen, rec.Time)
		}
		f, err := bth.ParseFrame(rec.Data)
		if err != nil || !f.VerifyICRC() {
			t.Fatalf("record %d: %v, or bad ICRC", i, err)
		}
		op := f.Pkt.Opcode()
		if f.Pkt.BTH().DestQPN() != b.qp.QPN() {
			t.Fatalf("record %d: %v to QP %#x, filter QP %#x", i, op, f.Pkt.BTH().DestQPN(), b.qp.QPN())
		}
		switch {
		case rec.Dir == dataplane.CaptureTX && op >= bth.RCWriteFirst && op <= bth.RCWriteLast:
			tx++
		case rec.Dir == dataplane.CaptureRX && op == bth.RCAcknowledge:
		default:
			t.Fatalf("record %d: %v %v", i, rec.Dir, op)
		}
	}
	matched, dropped, err := cp.Stop()
	if err != nil || matched < writes*4 || dropped != 0 {
		t.Fatalf("stop: matched %d dropped %d, %v", matched, dropped, err)
	}
	for {
		if _, err := cp.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	// The connection may capture again, now with a snap length.
	cp, err = cctx.Capture(CaptureOptions{SnapLen: 60, QPN: -1, Opcode: int(bth.RCAcknowledge)})
	if err != nil {
		t.Fatal(err)
	}
	a.write(t, b, 9, 100)
	rec, err := cp.Next()
	if err != nil || rec.Dir != dataplane.CaptureRX || len(rec.Data) > 60 || rec.OrigLen <= 0 {
		t.Fatalf("ACK record %+v, %v", rec, err)
	}
	if off, ok := capture.BTHOffset(rec.Data); !ok || bth.Opcode(rec.Data[off]) != bth.RCAcknowledge {
		t.Fatal("the record is not the ACK")
	}
	cp.Stop()
}

// TestCaptureDrops: a client that does not read loses frames to the
// daemon's full ring, counted as dropped; the transfer is not slowed
// into failure.
func TestCaptureDrops(t *testing.T) {
	_, a, b, cctx := capturePair(t)
	cp, err := cctx.Capture(CaptureOptions{QPN: -1, Opcode: -1, Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 20; i++ {
		a.write(t, b, i, 64<<10)
	}
	matched, dropped, err := cp.Stop()
	if err != nil || dropped == 0 || matched < 20*64 {
		t.Fatalf("stop: matched %d dropped %d, %v", matched, dropped, err)
	}
	t.Logf("matched %d, dropped %d", matched, dropped)
}
