package sweep

import (
	"bytes"
	"encoding/csv"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/recovery"
)

// TestQPSweepServerBudget: past the knee, budgeting the server alone (StaR's
// clients are separate machines) leaves one miss per message where
// budgeting both NICs makes two, so the floor roughly doubles.
func TestQPSweepServerBudget(t *testing.T) {
	both, err := RunQPs(point(8, 0))
	if err != nil {
		t.Fatal(err)
	}
	c := point(8, 0)
	c.ServerSRAMOnly = true
	server, err := RunQPs(c)
	if err != nil {
		t.Fatal(err)
	}
	if server.MsgRate < 1.6*both.MsgRate {
		t.Fatalf("server budget only: %.0f/s (hit %.3f), both NICs: %.0f/s", server.MsgRate, server.HitRate, both.MsgRate)
	}
}

// TestQPSweepOwnTimeouts: at 1% loss with 16 QPs, fasr with the one
// 16.8 ms timeout the QP sweep used to give every scheme waits out a lost
// tail for milliseconds; with its own RTO_low/RTO_high (adapted to the
// measured round trip, backoff on) it keeps most of its lossless rate.
func TestQPSweepOwnTimeouts(t *testing.T) {
	base := QPConfig{Scheme: recovery.FaSR, QPs: 16, Size: 8192, Loss: 0.01, Link: DefaultQPLink,
		Warmup: 2 * time.Millisecond, Measure: 10 * time.Millisecond, Seed: 16}
	one := base
	one.Params = recovery.Params{RTOLow: 16777216, RTOHigh: 16777216}
	old, err := RunQPs(one)
	if err != nil {
		t.Fatal(err)
	}
	own := one
	own.RTOBackoff, own.RTO = true, dataplane.RTOAdaptive
	r, err := RunQPs(own)
	if err != nil {
		t.Fatal(err)
	}
	lossless := base
	lossless.Loss = 0
	l, err := RunQPs(lossless)
	if err != nil {
		t.Fatal(err)
	}
	if r.MsgRate < 0.6*l.MsgRate || r.MsgRate < 5*old.MsgRate {
		t.Fatalf("own timeouts %.0f/s, one 16.8 ms timeout %.0f/s, lossless %.0f/s", r.MsgRate, old.MsgRate, l.MsgRate)
	}
}

// TestFasrFig7cThrash: with a scheduler that sends one packet per QP turn,
// a go-back-N NIC holding fewer contexts than its QPs misses on nearly
// every packet, while fasr, whose contexts all fit, never misses; the
// same QPs with whole-message turns miss once per message.
func TestFasrFig7cThrash(t *testing.T) {
	nics := FasrFig7cNICs()
	gbn, fasr := nics[0], nics[len(nics)-1]
	if gbn.Scheme != recovery.GBN || gbn.SRAM != CX6Budget() || fasr.SRAM != FaSRBudget {
		t.Fatalf("NICs %+v", nics)
	}
	gbn.SRAM, fasr.SRAM = CX6Budget()/32, CX6Budget() // 8 gbn contexts; 64 fasr contexts fit
	g, err := RunFasrFig7c(gbn, 32, 0, 1, time.Millisecond, 2*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	f, err := RunFasrFig7c(fasr, 32, 0, 1, time.Millisecond, 2*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := RunFasrFig7c(gbn, 32, 0, 8, time.Millisecond, 2*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if g.HitRate > 0.05 || f.HitRate != 1 || f.GoodputGbps < 5*g.GoodputGbps || msg.GoodputGbps < 2*g.GoodputGbps {
		t.Fatalf("gbn per packet %+v, per message %+v; fasr %+v", g, msg, f)
	}
	var buf bytes.Buffer
	WriteFasrFig7cCSV(&buf, []FasrFig7cPoint{g, f})
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(rows) != 3 || rows[0][0] != "scheme" || rows[0][1] != "loss" || rows[0][2] != "goodput_gbps" || rows[1][0] != "gbn" {
		t.Fatalf("csv %v %v", rows, err)
	}
}

// TestFasrDive: lossless, fasr's SR path is never taken and no bitmap is
// used; at 1% loss its operations show up, the fast path among them, and
// with 2 QPs (a deep window each) the receiver takes bitmap blocks.
func TestFasrDive(t *testing.T) {
	clean, err := RunFasrDive(2, 0, time.Millisecond, 2*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if clean.RxSlow+clean.TxSlow != 0 || clean.BlocksPeak != 0 || clean.BlocksSlots == 0 {
		t.Fatalf("lossless %+v", clean)
	}
	lossy, err := RunFasrDive(2, 0.01, time.Millisecond, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if lossy.RxFast == 0 || lossy.RxSlow == 0 || lossy.BlocksPeak == 0 || lossy.FastShare() <= 0 || lossy.FastShare() >= 1 {
		t.Fatalf("1%% loss %+v", lossy)
	}
}

// TestFasrDiveWorkload: Fig. 9b/10's QPs keep 512 packets in flight
// together at every QP count of the figure (8 KiB WRITEs while each QP
// has at least one, smaller single WRITEs past 64 QPs), and one packet
// per QP at least.
func TestFasrDiveWorkload(t *testing.T) {
	for _, n := range []int{2, 8, 32, 64, 128, 256, 512} {
		depth, size := FasrDiveWorkload(n)
		if got := n * depth * size / 1024; got != FasrDiveInFlight {
			t.Errorf("%d QPs: depth %d of %d B, %d packets in flight, want %d", n, depth, size, got, FasrDiveInFlight)
		}
		if size > 8192 || size%1024 != 0 || depth < 1 {
			t.Errorf("%d QPs: depth %d of %d B", n, depth, size)
		}
	}
	if depth, size := FasrDiveWorkload(1000); depth != 1 || size != 1024 {
		t.Errorf("1000 QPs: depth %d of %d B, want one WRITE of one packet", depth, size)
	}
	if c := FasrDiveConfig(128, 0.01, 0, 0); c.Depth != 1 || c.Size != 4096 {
		t.Errorf("128 QPs: config depth %d of %d B, want 1 of 4096", c.Depth, c.Size)
	}
}

// TestFasrFig7cIRNSRNIC: Fig. 7c's four NICs at a tenth of its scale (500
// QPs, a tenth of each on-chip budget, so the same share of each NIC's
// contexts fits: all of srnic's and fasr's, under half of irn's) at 1%
// loss with each NIC's scheduler turn and the service time: irn (its
// contexts thrash) and srnic (its bitmap queries stall the pipeline) both
// stay below fasr, and gbn below all three.
func TestFasrFig7cIRNSRNIC(t *testing.T) {
	got := map[string]FasrFig7cPoint{}
	for _, nic := range FasrFig7cNICs() {
		nic.SRAM /= 10
		p, err := RunFasrFig7c(nic, 500, 0.01, FasrFig7cTurn(nic), 2*time.Millisecond, 6*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %.2f Gb/s, hit rate %.3f, %d retransmits", nic.Name, p.GoodputGbps, p.HitRate, p.Retransmits)
		got[nic.Name] = p
	}
	f := got["fasr"]
	if f.HitRate != 1 || got["srnic"].HitRate != 1 || got["irn"].HitRate > 0.95 {
		t.Errorf("hit rates: fasr %.3f, srnic %.3f (want every context on chip), irn %.3f (want misses)", f.HitRate, got["srnic"].HitRate, got["irn"].HitRate)
	}
	for _, n := range []string{"irn", "srnic"} {
		if got[n].GoodputGbps >= 0.95*f.GoodputGbps {
			t.Errorf("%s %.2f Gb/s, fasr %.2f: want %s below 95%% of fasr", n, got[n].GoodputGbps, f.GoodputGbps, n)
		}
		if got["gbn"].GoodputGbps >= got[n].GoodputGbps {
			t.Errorf("gbn %.2f Gb/s not below %s %.2f", got["gbn"].GoodputGbps, n, got[n].GoodputGbps)
		}
	}
}
