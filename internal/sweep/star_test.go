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
	back, err := ReadStarFig5aCSV(&buf)
	if err != nil || len(back) != 1 || back[0].Mode != "star" || back[0].Connections != n || back[0].Misses != 0 {
		t.Errorf("read back %+v, %v", back, err)
	}
}
