package sweep

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// TestReadLossCSVRoundTrip: what WriteLossCSV writes, ReadLossCSV reads back.
func TestReadLossCSVRoundTrip(t *testing.T) {
	in := []LossResult{
		{LossConfig: LossConfig{Scheme: "gbn", Loss: 0, Size: 65536, Iters: 3000, MTU: qp.MTU1024}, Gbps: 23.5, Relative: 1},
		{LossConfig: LossConfig{Scheme: "gbn", Loss: 0.0001, Size: 65536, Iters: 3000, MTU: qp.MTU1024}, Gbps: 23.4, Relative: 0.9957, Retransmits: 923, Timeouts: 2},
	}
	var buf bytes.Buffer
	if err := WriteLossCSV(&buf, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadLossCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[1].Scheme != "gbn" || out[1].Loss != 0.0001 || out[1].Size != 65536 || out[1].Iters != 3000 ||
		out[1].MTU != qp.MTU1024 || out[1].Gbps != 23.4 || out[1].Relative != 0.9957 || out[1].Retransmits != 923 || out[1].Timeouts != 2 {
		t.Fatalf("read back %+v", out)
	}
}

// TestCombineLoss: testbed runs with extra columns and failed runs; repeats
// merge to the median run, relative to the scheme's lossless median; a
// scheme whose lossless runs all failed gets no relative goodput and no line.
func TestCombineLoss(t *testing.T) {
	const runs = `scheme,loss,size,iterations,mtu,goodput_gbps,relative,retransmits,ack_timeouts,rep,status,error
gbn,0,65536,100,1024,5.0,,10,0,1,ok,""
gbn,0.01,65536,10,1024,0.5,,1000,2,1,ok,""
gbn,0,65536,90,1024,4.0,,20,0,2,ok,""
gbn,0,65536,110,1024,6.0,,30,0,3,ok,""
gbn,0,65536,,1024,,,40,7,4,failed,"softnic-bench: perftest: RETRY_EXC_ERR"
fasr,0,65536,,1024,,,5,9,1,failed,"RETRY_EXC_ERR"
fasr,0.01,65536,80,1024,4.0,,100,3,1,ok,""
`
	rs, err := ReadLossCSV(strings.NewReader(runs))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 5 {
		t.Fatalf("%d ok rows, want 5", len(rs))
	}
	out, spread := CombineLoss(rs)
	if len(out) != 3 || len(spread) != 3 {
		t.Fatalf("combined %+v", out)
	}
	if out[0].Gbps != 5 || out[0].Iters != 100 || out[0].Retransmits != 10 || out[0].Relative != 1 || spread[0] != (Spread{Runs: 3, Min: 4, Max: 6}) {
		t.Fatalf("lossless gbn %+v %+v", out[0], spread[0])
	}
	if out[1].Relative != 0.1 || out[1].Timeouts != 2 {
		t.Fatalf("lossy gbn %+v", out[1])
	}
	if out[2].Scheme != "fasr" || out[2].Relative != 0 {
		t.Fatalf("fasr %+v", out[2])
	}
}

// TestReadQPCSV: testbed rows with an empty sr_bytes get the recovery
// package's accounting; failed rows are left out.
func TestReadQPCSV(t *testing.T) {
	const runs = `scheme,qps,size,loss,sram_bytes,fetch_penalty_ns,messages,msg_rate,goodput_gbps,cache_misses,hit_rate,peak_resident_qps,sr_bytes,retransmits,status,error
gbn,16,8,0,76800,1000,1000,500,0.001,0,1,16,,0,ok,""
irn,2000,8,0.01,76800,1000,100,50,0.0001,90,0.1,215,,7,ok,""
irn,5000,8,0.01,76800,1000,,,,,,,,,failed,"time limit"
`
	rs, err := ReadQPCSV(strings.NewReader(runs))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d rows, want 2", len(rs))
	}
	irn, _ := recovery.New("irn", recovery.Params{})
	if rs[0].SRBytes != 16*5 || rs[1].SRBytes != SRBytes(irn, 2000) || rs[1].Penalty != time.Microsecond || rs[1].Loss != 0.01 ||
		rs[1].MsgRate != 50 || rs[1].PeakQPs != 215 || rs[1].Retransmits != 7 || rs[1].HitRate != 0.1 {
		t.Fatalf("%+v", rs)
	}
	path, err := SaveQPs(t.TempDir(), "testbed-qps", rs)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "testbed-qps.csv" {
		t.Fatalf("wrote %s", path)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if back, err := ReadQPCSV(f); err != nil || len(back) != 2 || back[1].SRBytes != rs[1].SRBytes || back[1].MsgRate != rs[1].MsgRate || back[1].Scheme != "irn" {
		t.Fatalf("read back %+v, %v", back, err)
	}
}

// TestSRBytesEveryScheme: the SR bytes the QP sweep plots are each
// registered scheme's own accounting, per QP plus shared pools, so a new
// scheme shows up with its own figure.
func TestSRBytesEveryScheme(t *testing.T) {
	for _, name := range recovery.Names() {
		s, err := recovery.New(name, recovery.Params{})
		if err != nil {
			t.Fatal(err)
		}
		perQP := s.NewSender().OnChipBytes() + s.NewReceiver().OnChipBytes()
		if got, want := SRBytes(s, 5000), 5000*perQP+s.SharedOnChipBytes(); got != want || got <= 0 {
			t.Fatalf("%s: SRBytes(5000) = %d, want %d", name, got, want)
		}
		r, err := RunQPs(QPConfig{Scheme: name, QPs: 3, Size: 8, SRAM: StaRBudget, Penalty: time.Microsecond, Link: DefaultQPLink,
			Warmup: 100 * time.Microsecond, Measure: 500 * time.Microsecond, Seed: 1})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.SRBytes != SRBytes(s, 3) {
			t.Fatalf("%s: RunQPs SR bytes %d, want %d", name, r.SRBytes, SRBytes(s, 3))
		}
	}
}

// TestQPMaxMessages: a lossless point capped by messages measures the same
// rate as the whole window (the rate is steady), and stops early.
func TestQPMaxMessages(t *testing.T) {
	c := point(4, 0)
	full, err := RunQPs(c)
	if err != nil {
		t.Fatal(err)
	}
	c.MaxMessages = full.Messages / 4
	capped, err := RunQPs(c)
	if err != nil {
		t.Fatal(err)
	}
	if capped.Messages < c.MaxMessages || capped.Messages > c.MaxMessages+4 {
		t.Fatalf("capped at %d, measured %d", c.MaxMessages, capped.Messages)
	}
	if d := capped.MsgRate/full.MsgRate - 1; d > 0.02 || d < -0.02 {
		t.Fatalf("capped rate %.0f, full %.0f", capped.MsgRate, full.MsgRate)
	}
}

// TestReadIRNCSV: an IRN figure's rows and an incast's read back as
// written, variants and "none" included.
func TestReadIRNCSV(t *testing.T) {
	in := []IRNResult{
		{IRNPoint: IRNPoint{Scheme: "irn", Variant: IRNGoBackN, CC: "dcqcn", Load: 0.7, Seed: 2, K: 6},
			FlowRunResult: FlowRunResult{AvgSlowdown: 3.25, AvgFCT: 233 * time.Microsecond, P99FCT: 3093 * time.Microsecond}},
		{IRNPoint: IRNPoint{Scheme: "gbn", PFC: true, Load: 0.7, Seed: 1, K: 6},
			FlowRunResult: FlowRunResult{AvgSlowdown: 11.5, AvgFCT: 478 * time.Microsecond, P99FCT: 2750 * time.Microsecond}},
	}
	var b strings.Builder
	if err := WriteIRNCSV(&b, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadIRNCSV(strings.NewReader(b.String()))
	if err != nil || len(out) != 2 {
		t.Fatalf("%v, %d rows", err, len(out))
	}
	for i := range in {
		g, w := out[i], in[i]
		if g.Label() != w.Label() || g.PFC != w.PFC || g.CC != w.CC || g.Seed != w.Seed || g.K != w.K ||
			g.AvgSlowdown != w.AvgSlowdown || g.AvgFCT != w.AvgFCT || g.P99FCT != w.P99FCT {
			t.Errorf("row %d: read %+v, wrote %+v", i, g.IRNPoint, w.IRNPoint)
		}
	}
	ic := []IncastResult{{IncastPoint: IncastPoint{Scheme: "irn", CC: "timely", M: 30, Total: IncastTotal, Seed: 3, K: 6}, RCT: 34524 * time.Microsecond}}
	b.Reset()
	if err := WriteIncastCSV(&b, ic); err != nil {
		t.Fatal(err)
	}
	got, err := ReadIncastCSV(strings.NewReader(b.String()))
	if err != nil || len(got) != 1 || got[0].IncastPoint != ic[0].IncastPoint || got[0].RCT != ic[0].RCT {
		t.Fatalf("incast: %v, %+v", err, got)
	}
}
