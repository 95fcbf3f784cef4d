package capture

import (
	"os"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/internal/pcap"
)

func someFrames(t *testing.T) [][]byte {
	var out [][]byte
	if err := LossyTraffic("fasr", 1, 0.05, 1, func(a, _ *dataplane.Engine) {
		a.SetCapture(func(_ dataplane.CaptureDir, _ time.Duration, f []byte) { out = append(out, append([]byte(nil), f...)) })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFilter(t *testing.T) {
	frames := someFrames(t)
	byOp := map[int]int{}
	byQP := map[int64]int{}
	for _, f := range frames {
		p, err := bth.ParseFrame(f)
		if err != nil {
			t.Fatal(err)
		}
		byOp[int(p.Pkt.Opcode())]++
		byQP[int64(p.Pkt.BTH().DestQPN())]++
	}
	if len(byOp) < 3 || len(byQP) == 0 {
		t.Fatalf("traffic has opcodes %v and QPNs %v", byOp, byQP)
	}
	count := func(f Filter) (n int) {
		for _, fr := range frames {
			if f.Match(fr) {
				n++
			}
		}
		return n
	}
	for op, want := range byOp {
		if got := count(Filter{QPN: -1, Opcode: op}); got != want {
			t.Errorf("opcode %#x: %d frames match, want %d", op, got, want)
		}
	}
	for qpn, want := range byQP {
		if got := count(Filter{QPN: qpn, Opcode: -1}); got != want {
			t.Errorf("QPN %#x: %d frames match, want %d", qpn, got, want)
		}
	}
	if got := count(Filter{QPN: 0xABCDE, Opcode: -1}); got != 0 {
		t.Errorf("QPN 0xABCDE: %d frames match", got)
	}
	if got := count(All); got != len(frames) {
		t.Errorf("empty filter: %d of %d", got, len(frames))
	}
	short := frames[0][:30]
	if !All.Match(short) || (Filter{QPN: -1, Opcode: 0xD1}).Match(short) {
		t.Error("a truncated frame: the empty filter takes it, an opcode filter does not")
	}
	for s, want := range map[string]int{"0xd1": 0xD1, "209": 0xD1, "rc_acknowledge_sack": 0xD1, "STAR_GD": 0xE5} {
		if got, err := ParseOpcode(s); err != nil || got != want {
			t.Errorf("ParseOpcode(%q) = %#x, %v", s, got, err)
		}
	}
	if _, err := ParseOpcode("NOPE"); err == nil {
		t.Error("ParseOpcode(NOPE) succeeded")
	}
}

// TestRing: the ring keeps what fits, counts the rest as dropped, cuts to
// the snap length and encodes records that decode back.
func TestRing(t *testing.T) {
	r := NewRing(4, 10, All)
	frame := []byte("0123456789abcdef")
	for i := 0; i < 6; i++ {
		r.Offer(dataplane.CaptureTX, int64(1000+i), frame)
	}
	matched, dropped := r.Stats()
	if matched != 6 || dropped != 2 {
		t.Fatalf("matched %d dropped %d, want 6 and 2", matched, dropped)
	}
	select {
	case <-r.Ready():
	default:
		t.Fatal("no ready token")
	}
	buf := make([]byte, RecordHeaderLen+10)
	for i := 0; i < 4; i++ {
		n := r.Take(buf)
		rec, err := DecodeRecord(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		if rec.Time.UnixNano() != int64(1000+i) || rec.Dir != dataplane.CaptureTX || rec.OrigLen != 16 || string(rec.Data) != "0123456789" {
			t.Fatalf("record %d: %+v", i, rec)
		}
	}
	if r.Take(buf) != 0 {
		t.Fatal("ring not empty")
	}
	if _, err := DecodeRecord(buf[:5]); err == nil {
		t.Fatal("short record decoded")
	}
	r.Close()
	r.Offer(dataplane.CaptureRX, 1, frame)
	if m, _ := r.Stats(); m != 6 {
		t.Fatal("closed ring took a frame")
	}
	if n := testing.AllocsPerRun(100, func() { r2 := r; r2.Offer(dataplane.CaptureRX, 1, frame) }); n != 0 {
		t.Fatalf("Offer allocates %.1f", n)
	}
}

// TestPcapTap: the embedded tools' --pcap writes every frame of the
// engine, ICRC intact, with the simulated time.
func TestPcapTap(t *testing.T) {
	path := t.TempDir() + "/x.pcap"
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var seen [][]byte
	err = LossyTraffic("irn", 2, 0.02, 1, func(a, _ *dataplane.Engine) {
		a.SetCapture(func(_ dataplane.CaptureDir, _ time.Duration, f []byte) {
			seen = append(seen, append([]byte(nil), f...))
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	// The same run again (the fabric is seeded), through AttachPcap.
	var tap *PcapTap
	err = LossyTraffic("irn", 2, 0.02, 1, func(a, _ *dataplane.Engine) {
		var aerr error
		if tap, aerr = AttachPcap(a, fh, 0, All); aerr != nil {
			t.Fatal(aerr)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	written, err := tap.Close()
	if err != nil || written != uint64(len(seen)) {
		t.Fatalf("pcap tap wrote %d frames (%v), the engine had %d", written, err, len(seen))
	}
	fh.Close()
	rf, _ := os.Open(path)
	defer rf.Close()
	rd, err := pcap.NewReader(rf)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var last time.Duration
	for ; ; n++ {
		p, err := rd.Next()
		if err != nil {
			break
		}
		// Keys differ between runs (the engines draw them), opcodes,
		// PSNs and lengths do not.
		if n >= len(seen) || len(p.Data) != len(seen[n]) || p.OrigLen != len(p.Data) {
			t.Fatalf("packet %d: %d bytes, the engine's frame %d", n, len(p.Data), len(seen[n]))
		}
		f, err := bth.ParseFrame(p.Data)
		if err != nil || !f.VerifyICRC() {
			t.Fatalf("packet %d: %v or bad ICRC", n, err)
		}
		g, _ := bth.ParseFrame(seen[n])
		if f.Pkt.Opcode() != g.Pkt.Opcode() || f.Pkt.BTH().PSN() != g.Pkt.BTH().PSN() {
			t.Fatalf("packet %d: %v PSN %d, the engine's %v PSN %d", n, f.Pkt.Opcode(), f.Pkt.BTH().PSN(), g.Pkt.Opcode(), g.Pkt.BTH().PSN())
		}
		if p.Time < last {
			t.Fatalf("packet %d: time goes back", n)
		}
		last = p.Time
	}
	if n != len(seen) || n == 0 {
		t.Fatalf("%d packets in the file, the engine had %d", n, len(seen))
	}
}
