package perftest

import (
	"math"
	"math/rand/v2"
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

func TestPeakMeter(t *testing.T) {
	// A steady 100k messages/s for 100 ms: the peak is that rate.
	m := newPeakMeter(10 * time.Millisecond)
	for i := 1; i <= 10000; i++ {
		m.add(time.Duration(i)*10*time.Microsecond, 1)
	}
	if r := m.msgRate(); math.Abs(r-1e5)/1e5 > 0.02 {
		t.Fatalf("steady peak %.0f/s, want 100000", r)
	}
	if len(m.marks)-m.head > 70 {
		t.Fatalf("%d window starts kept; memory must be bounded by the span", len(m.marks)-m.head)
	}

	// Bursts of 128 completions every 2 ms (a preempted poll loop
	// catching up) are 64k/s however they are batched: the peak must not
	// read the burst as a rate.
	m = newPeakMeter(10 * time.Millisecond)
	for i := 1; i <= 50; i++ {
		m.add(time.Duration(i)*2*time.Millisecond, 128)
	}
	if r := m.msgRate(); r > 64000*1.25 {
		t.Fatalf("bursty peak %.0f/s, want about 64000", r)
	}

	// A run shorter than the span has no peak of its own.
	m = newPeakMeter(10 * time.Millisecond)
	m.add(time.Millisecond, 500)
	if m.msgRate() != 0 {
		t.Fatal("peak before a full span")
	}

	// A faster stretch in the middle of a run is found.
	m = newPeakMeter(10 * time.Millisecond)
	now := time.Duration(0)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 30000; i++ {
		step := 20 * time.Microsecond
		if i >= 10000 && i < 20000 {
			step = 5 * time.Microsecond // 200k/s for 50 ms
		}
		now += step
		m.add(now, 1+rng.IntN(1)) // one at a time
	}
	if r := m.msgRate(); math.Abs(r-2e5)/2e5 > 0.03 {
		t.Fatalf("peak of the fast stretch %.0f/s, want 200000", r)
	}
}

func TestBWRow(t *testing.T) {
	var r Row
	// 1000 messages of 1 MB in 1 s: 8 Gb/s, 0.001 Mpps.
	bwRow(&r, 1000000, 1000, time.Second, 0)
	if r.Bytes != 1000000 || r.Iters != 1000 || r.AvgGbps != 8 || r.PeakGbps != 8 || r.MsgRateMpps != 0.001 {
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
