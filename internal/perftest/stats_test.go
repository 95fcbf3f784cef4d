package perftest

import (
	"math"
	"testing"
	"time"
)

func TestLatencies(t *testing.T) {
	var s []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		s = append(s, time.Duration(i)*time.Microsecond)
	}
	got := Latencies(s)
	want := LatStats{
		Min: time.Microsecond, Max: 100 * time.Microsecond,
		Typical: 51 * time.Microsecond, // sorted[n/2], perftest's t_typical
		Avg:     50500 * time.Nanosecond,
		// Population deviation of 1..100: sqrt((100^2-1)/12) = 28.866 µs.
		Stdev: time.Duration(math.Round(math.Sqrt((100*100-1)/12.0) * 1000)),
		P99:   99 * time.Microsecond, P999: 100 * time.Microsecond,
	}
	if got != want {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if (Latencies(nil) != LatStats{}) {
		t.Fatal("no samples must give zeros")
	}
	one := Latencies([]time.Duration{7})
	if one.Min != 7 || one.Max != 7 || one.Typical != 7 || one.P99 != 7 || one.P999 != 7 || one.Stdev != 0 {
		t.Fatalf("one sample: %+v", one)
	}
}

func TestPercentileNearestRank(t *testing.T) {
	sorted := func(n int) []time.Duration {
		s := make([]time.Duration, n)
		for i := range s {
			s[i] = time.Duration(i + 1)
		}
		return s
	}
	for _, tc := range []struct {
		n    int
		p    float64
		want time.Duration
	}{
		{1000, 99, 990}, {1000, 99.9, 999}, {1000, 100, 1000}, {1000, 50, 500},
		{10, 99, 10}, {10, 99.9, 10}, {10, 10, 1}, {10, 0.1, 1},
		{1, 99.9, 1}, {100000, 99.9, 99900}, {3, 50, 2},
	} {
		if got := Percentile(sorted(tc.n), tc.p); got != tc.want {
			t.Errorf("Percentile(1..%d, %g) = %d, want %d", tc.n, tc.p, got, tc.want)
		}
	}
	if Percentile(nil, 99) != 0 {
		t.Error("empty")
	}
}

// TestPeakAsPerftest: BW peak is perftest's, the best time per message
// from the post of WR i to the completion of WR j.
func TestPeakAsPerftest(t *testing.T) {
	us := func(v int) time.Duration { return time.Duration(v) * time.Microsecond }
	// One WR at a time, 10 us each: 100k messages/s.
	p := newPeakRecorder(0, 1)
	for i := range 100 {
		p.post(us(10*i), 1)
		p.complete(us(10*i+10), 1)
	}
	if r := p.msgRate(); math.Abs(r-1e5) > 1 {
		t.Fatalf("serial peak %.0f/s, want 100000", r)
	}
	// Four WRs posted at 0, completions at 100, 101, 102, 103 us: every
	// stretch starts at 0, and the longest, 4 messages in 103 us, is
	// the best.
	p = newPeakRecorder(0, 1)
	p.post(0, 4)
	for i := range 4 {
		p.complete(us(100+i), 1)
	}
	if r, want := p.msgRate(), 4/103e-6; math.Abs(r-want)/want > 1e-9 {
		t.Fatalf("burst peak %.0f/s, want %.0f", r, want)
	}
	// A late post followed by a burst of completions reads the burst as
	// a rate: WR 1 posted at 99 us, completions of 1 and 2 at 100 us.
	p = newPeakRecorder(0, 1)
	p.post(0, 1)
	p.post(us(99), 2)
	p.complete(us(50), 1)
	p.complete(us(100), 2)
	if r, want := p.msgRate(), 2/1e-6; math.Abs(r-want)/want > 1e-9 {
		t.Fatalf("peak %.0f/s, want %.0f (2 messages in 1 us)", r, want)
	}
	// With a post list of 2 only stretches starting at list heads (WRs 0
	// and 2) count: WR 2 alone, posted at 99 us and completed at 100.
	p.list = 2
	if r, want := p.msgRate(), 1/1e-6; math.Abs(r-want)/want > 1e-9 {
		t.Fatalf("post-list peak %.0f/s, want %.0f", r, want)
	}
	if newPeakRecorder(0, 1).msgRate() != 0 {
		t.Fatal("peak of nothing")
	}
}

func TestBWRow(t *testing.T) {
	var r Row
	// 1000 messages of 1 MB in 1 s: 8 Gb/s, 0.001 Mpps; no peak measured.
	bwRow(&r, 1000000, 1000, time.Second, 0)
	if r.Bytes != 1000000 || r.Iters != 1000 || r.AvgGbps != 8 || r.PeakGbps != 0 || r.MsgRateMpps != 0.001 {
		t.Fatalf("%+v", r)
	}
	bwRow(&r, 1000000, 1000, time.Second, 2000)
	if r.PeakGbps != 16 {
		t.Fatalf("peak %v, want 16", r.PeakGbps)
	}
	r = Row{}
	bwRow(&r, 8, 0, 0, 0) // nothing completed: no division by zero
	if r.AvgGbps != 0 || math.IsNaN(r.PeakGbps) {
		t.Fatalf("%+v", r)
	}
}

func TestLoadByte(t *testing.T) {
	buf, err := MmapBuf(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer MunmapBuf(buf)
	if !aligned(buf) {
		t.Fatal("mmapped buffer not aligned")
	}
	for i := range 64 {
		buf[i] = byte(i * 3)
	}
	for i := range 64 {
		if got := loadByte(buf, i); got != byte(i*3) {
			t.Fatalf("loadByte(%d) = %d, want %d", i, got, byte(i*3))
		}
	}
	if aligned(buf[1:9]) || aligned(buf[:12]) {
		t.Fatal("misaligned or odd-length buffers must be refused")
	}
	if _, err := MmapBuf(0); err == nil {
		t.Fatal("empty buffer")
	}
}

func TestSeqByte(t *testing.T) {
	prev := byte(0)
	for k := 1; k <= 1000; k++ {
		v := seqByte(k)
		if v == 0 || v == prev {
			t.Fatalf("seqByte(%d) = %d after %d: must be non-zero and differ from the previous", k, v, prev)
		}
		prev = v
	}
}
