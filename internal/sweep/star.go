package sweep

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// StaR's Fig. 5a (StaR §4.1), the stress test, with the paper's setup: a
// server and its clients on a 100 Gb/s switch with a 12 µs base RTT
// (DefaultQPLink), a 1 µs PCIe access for a context fetch (the default
// miss stall), the server's RNIC holding 300 contexts (StaRBudget), the
// clients unlimited (they stand for many machines), no loss. Each client
// keeps one 8-byte WRITE outstanding on its connection and posts the next
// as soon as it completes; the aggregate WRITE rate is measured at the
// clients. mode "rdma" is the stateful NIC (go-back-N, as a CX4 runs);
// mode "star" is StaR's stateless server with IRN's selective repeat at
// the clients, which the paper leaves open ("selective repeat fits").

// StarFig5aCounts are the connection counts of the sweep.
var StarFig5aCounts = []int{1, 10, 50, 100, 200, 290, 300, 400, 500, 1000, 2000, 3000, 4000, 5000}

// StarPoint is one point of Fig. 5a.
type StarPoint struct {
	Mode        string // "rdma" or "star"
	Connections int
	MsgRate     float64 // WRITEs per second (simulated time)
	// Misses are the server's context-cache misses in the measurement
	// window; OnChipPeak the most context bytes it held on chip.
	Misses     uint64
	OnChipPeak int
}

// StarFig5aConfig returns the QP sweep's configuration of one point.
func StarFig5aConfig(mode string, n int, measure time.Duration, maxMsgs uint64) (QPConfig, error) {
	c := QPConfig{QPs: n, Size: 8, SRAM: StaRBudget, Penalty: qp.DefaultFetchPenalty, Link: DefaultQPLink,
		Warmup: 20 * time.Millisecond, Measure: measure, MaxMessages: maxMsgs, Seed: uint64(n), ServerSRAMOnly: true,
		// The QP sweep's one ACK timeout (code 12, 16.8 ms) for every
		// scheme: lossless, no timer should fire.
		Params: recovery.Params{RTOLow: 16777216 * time.Nanosecond, RTOHigh: 16777216 * time.Nanosecond}}
	switch mode {
	case "rdma":
		c.Scheme = recovery.GBN
	case "star":
		c.Scheme, c.Star = recovery.IRN, true
	default:
		return QPConfig{}, fmt.Errorf("sweep: StaR mode %q: want rdma or star", mode)
	}
	return c, nil
}

// RunStarFig5a runs one point.
func RunStarFig5a(mode string, n int, measure time.Duration, maxMsgs uint64) (StarPoint, error) {
	c, err := StarFig5aConfig(mode, n, measure, maxMsgs)
	if err != nil {
		return StarPoint{}, err
	}
	r, err := RunQPs(c)
	if err != nil {
		return StarPoint{}, fmt.Errorf("sweep: StaR Fig. 5a, %s, %d connections: %w", mode, n, err)
	}
	return StarPoint{Mode: mode, Connections: n, MsgRate: r.MsgRate, Misses: r.Misses, OnChipPeak: r.ServerOnChipPeak}, nil
}

// WriteStarFig5aCSV writes the points as docs/results/star-fig5a.csv
// holds them: mode, connections, msg_rate, then the server's context-cache
// misses and on-chip context bytes (peak).
func WriteStarFig5aCSV(w io.Writer, ps []StarPoint) error {
	if _, err := fmt.Fprintln(w, "mode,connections,msg_rate,server_qpc_misses,server_onchip_bytes_peak"); err != nil {
		return err
	}
	for _, p := range ps {
		if _, err := fmt.Fprintf(w, "%s,%d,%.0f,%d,%d\n", p.Mode, p.Connections, p.MsgRate, p.Misses, p.OnChipPeak); err != nil {
			return err
		}
	}
	return nil
}

// SaveStarFig5aCSV writes dir/star-fig5a.csv and returns its path (the
// PNG is package sweepplot's StarFig5a, which the daemon does not link).
func SaveStarFig5aCSV(dir string, ps []StarPoint) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	csvPath := filepath.Join(dir, "star-fig5a.csv")
	f, err := os.Create(csvPath)
	if err != nil {
		return "", err
	}
	if err := WriteStarFig5aCSV(f, ps); err != nil {
		f.Close()
		return "", err
	}
	return csvPath, f.Close()
}

// ReadStarFig5aCSV reads what WriteStarFig5aCSV wrote.
func ReadStarFig5aCSV(r io.Reader) ([]StarPoint, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("sweep: StaR Fig. 5a CSV: %w", err)
	}
	if len(rows) == 0 || len(rows[0]) < 3 || rows[0][0] != "mode" || rows[0][1] != "connections" || rows[0][2] != "msg_rate" {
		return nil, fmt.Errorf("sweep: StaR Fig. 5a CSV: the header is not mode,connections,msg_rate,...")
	}
	var ps []StarPoint
	for i, row := range rows[1:] {
		if len(row) != len(rows[0]) {
			return nil, fmt.Errorf("sweep: StaR Fig. 5a CSV line %d: %d fields, want %d", i+2, len(row), len(rows[0]))
		}
		n, err1 := strconv.Atoi(row[1])
		rate, err2 := strconv.ParseFloat(row[2], 64)
		if err1 != nil || err2 != nil || n < 1 || rate < 0 {
			return nil, fmt.Errorf("sweep: StaR Fig. 5a CSV line %d: bad connections or msg_rate", i+2)
		}
		p := StarPoint{Mode: row[0], Connections: n, MsgRate: rate}
		if len(row) >= 5 {
			m, _ := strconv.ParseUint(row[3], 10, 64)
			b, _ := strconv.Atoi(row[4])
			p.Misses, p.OnChipPeak = m, b
		}
		ps = append(ps, p)
	}
	return ps, nil
}
