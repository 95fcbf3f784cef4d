package sweep

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestStarFig5aShape: past the server's 300 contexts the stateful NIC
// collapses to about one WRITE per context fetch, while StaR's server,
// with no context on chip and no cache miss, serves every connection at
// its round trip. Short windows (the full sweep is `softnic sweep star`).
func TestStarFig5aShape(t *testing.T) {
	const n = 600
	rdma, err := RunStarFig5a("rdma", n, 2*time.Millisecond, 4000)
	if err != nil {
		t.Fatal(err)
	}
	star, err := RunStarFig5a("star", n, 2*time.Millisecond, 40000)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d connections: rdma %.2f Mops (%d misses), star %.2f Mops", n, rdma.MsgRate/1e6, rdma.Misses, star.MsgRate/1e6)
	if star.Misses != 0 || star.OnChipPeak != 0 {
		t.Errorf("StaR's server: %d cache misses, %d bytes on chip", star.Misses, star.OnChipPeak)
	}
	if rdma.Misses == 0 || rdma.OnChipPeak == 0 {
		t.Errorf("the stateful server never missed: %+v", rdma)
	}
	// One outstanding WRITE per connection and a 12 µs RTT: StaR's rate
	// is n/RTT; the stateful NIC's at most one per 1 µs fetch.
	if star.MsgRate < 20*rdma.MsgRate {
		t.Errorf("star %.0f/s is not 20x rdma %.0f/s", star.MsgRate, rdma.MsgRate)
	}
	if _, err := RunStarFig5a("rocev3", 1, time.Millisecond, 1); err == nil {
		t.Error("an unknown mode ran")
	}
	var buf bytes.Buffer
	if err := WriteStarFig5aCSV(&buf, []StarPoint{star}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "mode,connections,msg_rate,") || !strings.Contains(buf.String(), "\nstar,600,") {
		t.Errorf("CSV:\n%s", buf.String())
	}
	fig, back, err := ReadStarCSV(&buf)
	if err != nil || fig != "5a" || len(back) != 1 || back[0].Mode != "star" || back[0].Connections != n || back[0].Misses != 0 {
		t.Errorf("read back %+v, %v", back, err)
	}
}

// TestStarFig5bShape: in the RPC test StaR pays an extra round trip per
// call at one connection (its server's SEND travels as a WQEP first), and
// past the server's 300 contexts keeps its rate where the stateful NIC
// falls to about one context fetch per packet.
func TestStarFig5bShape(t *testing.T) {
	rate := func(mode string, n int, calls uint64) StarPoint {
		t.Helper()
		p, err := RunStarFig5b(mode, n, 2*time.Millisecond, calls)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	r1, s1 := rate("rdma", 1, 50), rate("star", 1, 50)
	if s1.MsgRate >= r1.MsgRate {
		t.Errorf("one connection: star %.0f calls/s, rdma %.0f: StaR's WQEP round trip is missing", s1.MsgRate, r1.MsgRate)
	}
	r, s := rate("rdma", 600, 3000), rate("star", 600, 20000)
	t.Logf("1 connection: rdma %.0f, star %.0f calls/s; 600: rdma %.0f (%d misses), star %.0f", r1.MsgRate, s1.MsgRate, r.MsgRate, r.Misses, s.MsgRate)
	if s.Misses != 0 || s.OnChipPeak != 0 || r.Misses == 0 {
		t.Errorf("server misses: star %d (%d bytes on chip), rdma %d", s.Misses, s.OnChipPeak, r.Misses)
	}
	if s.MsgRate < 3*r.MsgRate {
		t.Errorf("600 connections: star %.0f calls/s is not 3x rdma %.0f", s.MsgRate, r.MsgRate)
	}
	var buf bytes.Buffer
	if err := WriteStarFig5bCSV(&buf, []StarPoint{s}); err != nil {
		t.Fatal(err)
	}
	if fig, back, err := ReadStarCSV(&buf); err != nil || fig != "5b" || len(back) != 1 || back[0].Connections != 600 {
		t.Errorf("CSV read back: %s %+v %v", fig, back, err)
	}
}
