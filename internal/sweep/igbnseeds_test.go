package sweep

import (
	"bytes"
	"encoding/csv"
	"math"
	"slices"
	"strconv"
	"testing"
)

// TestTInterval95: the mean and its 95% Student t-interval, against values
// worked by hand; one value's interval is the value.
func TestTInterval95(t *testing.T) {
	// mean 3, s = sqrt(2.5), t(0.975, 4) = 2.776: half-width 1.9630.
	m, lo, hi := TInterval95([]float64{1, 2, 3, 4, 5})
	if m != 3 || math.Abs(lo-1.0370) > 1e-4 || math.Abs(hi-4.9630) > 1e-4 {
		t.Fatalf("1..5: %v [%v, %v]", m, lo, hi)
	}
	if m, lo, hi := TInterval95([]float64{0.5}); m != 0.5 || lo != 0.5 || hi != 0.5 {
		t.Fatalf("one value: %v [%v, %v]", m, lo, hi)
	}
	if m, lo, hi := TInterval95([]float64{0.25, 0.25, 0.25}); m != 0.25 || lo != 0.25 || hi != 0.25 {
		t.Fatalf("equal values: %v [%v, %v]", m, lo, hi)
	}
}

// TestSummarizeIGBN: runs relativized against their own seed's lossless
// point, grouped by point in first-seen order, means, totals, min and max
// per seed; the summary CSV starts with the single-run CSV's columns, so
// that ReadIGBNCSV reads it, and the runs CSV names each run's seed.
func TestSummarizeIGBN(t *testing.T) {
	run := func(s string, loss float64, seed uint64, gbps float64, to uint64) IGBNResult {
		return IGBNResult{IGBNConfig: IGBNConfig{Scheme: s, Loss: loss, Timeout: 15, Messages: 400, Seed: seed}, Gbps: gbps, Timeouts: to, Retransmits: 10 * to,
			Reasons: [4]uint64{to, 0, 0, 0}, SentPkts: 5 * to, NaksSent: to, NaksRcvd: to / 2, OutOfSeq: 3 * to / 2}
	}
	rs := []IGBNResult{
		run("gbn", 0, 1, 40, 0), run("gbn", 0, 2, 20, 0), // seed 2's lossless is its own base
		run("gbn", 0.01, 1, 10, 3), run("gbn", 0.01, 2, 10, 1),
		run("igbn", 0, 1, 40, 0), run("igbn", 0.01, 1, 30, 0),
	}
	RelativizeIGBN(rs)
	if rs[2].Relative != 0.25 || rs[3].Relative != 0.5 {
		t.Fatalf("relative %v %v: want each seed over its own lossless run", rs[2].Relative, rs[3].Relative)
	}
	ss := SummarizeIGBN(rs)
	if len(ss) != 4 || ss[0].Scheme != "gbn" || ss[0].Loss != 0 || ss[1].Loss != 0.01 || ss[2].Scheme != "igbn" {
		t.Fatalf("points %+v", ss)
	}
	g := ss[1]
	_, lo, hi := TInterval95([]float64{0.25, 0.5})
	if g.Seeds != 2 || g.Relative != 0.375 || g.Gbps != 10 || g.Messages != 800 || g.Timeouts != 4 || g.Retransmits != 40 || g.Reasons[0] != 4 ||
		g.RelMin != 0.25 || g.RelMax != 0.5 || g.RelLo != lo || g.RelHi != hi || g.TimeoutsMin != 1 || g.TimeoutsMax != 3 {
		t.Fatalf("gbn at 1%%: %+v", g)
	}
	if ss[3].Seeds != 1 || ss[3].RelLo != 0.75 || ss[3].RelHi != 0.75 {
		t.Fatalf("igbn at 1%%: %+v", ss[3])
	}
	var single, sum, runs bytes.Buffer
	if err := WriteIGBNCSV(&single, rs); err != nil {
		t.Fatal(err)
	}
	if err := WriteIGBNSummaryCSV(&sum, ss); err != nil {
		t.Fatal(err)
	}
	if err := WriteIGBNRunsCSV(&runs, rs); err != nil {
		t.Fatal(err)
	}
	head := func(b []byte) [][]string {
		rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	one, sr, rr := head(single.Bytes()), head(sum.Bytes()), head(runs.Bytes())
	if !slices.Equal(sr[0][:len(one[0])], one[0]) || !slices.Equal(sr[0][len(one[0]):], []string{"seeds", "relative_min", "relative_max",
		"relative_ci95_lo", "relative_ci95_hi", "ack_timeouts_min", "ack_timeouts_max", "sent_pkts", "seq_naks_sent", "seq_naks_rcvd", "go_back_free", "out_of_seq"}) {
		t.Fatalf("summary header %v", sr[0])
	}
	f4 := func(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }
	if !slices.Equal(sr[2], []string{"gbn", "0.01", "0.3750", "134217", "800", "10.000", "40", "4", "4", "0", "0", "0", "0", "0",
		"2", "0.2500", "0.5000", f4(lo), f4(hi), "1", "3", "20", "4", "1", "0", "5"}) {
		t.Fatalf("summary row %v", sr[2])
	}
	if !slices.Equal(rr[0][:len(one[0])+2], append(one[0], "seed", "sent_pkts")) || len(rr) != 1+len(rs) || rr[4][len(one[0])] != "2" {
		t.Fatalf("runs %v", rr)
	}
	back, err := ReadIGBNCSV(bytes.NewReader(sum.Bytes()))
	if err != nil || len(back) != 4 || back[1].Relative != 0.375 || back[1].Messages != 800 {
		t.Fatalf("read back %+v, %v", back, err)
	}
}
