package sweep

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
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
func WriteStarFig5aCSV(w io.Writer, ps []StarPoint) error { return writeStarCSV(w, "msg_rate", ps) }

// WriteStarFig5bCSV writes the points as docs/results/star-fig5b.csv
// holds them: mode, connections, call_rate, then the server's misses and
// on-chip bytes.
func WriteStarFig5bCSV(w io.Writer, ps []StarPoint) error { return writeStarCSV(w, "call_rate", ps) }

func writeStarCSV(w io.Writer, rate string, ps []StarPoint) error {
	if _, err := fmt.Fprintf(w, "mode,connections,%s,server_qpc_misses,server_onchip_bytes_peak\n", rate); err != nil {
		return err
	}
	for _, p := range ps {
		if _, err := fmt.Fprintf(w, "%s,%d,%.0f,%d,%d\n", p.Mode, p.Connections, p.MsgRate, p.Misses, p.OnChipPeak); err != nil {
			return err
		}
	}
	return nil
}

// SaveStarCSV writes dir/star-fig5a.csv (fig "5a") or dir/star-fig5b.csv
// (fig "5b") and returns its path (the PNG is package sweepplot's Star,
// which the daemon does not link).
func SaveStarCSV(dir, fig string, ps []StarPoint) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	csvPath := filepath.Join(dir, "star-fig"+fig+".csv")
	f, err := os.Create(csvPath)
	if err != nil {
		return "", err
	}
	write := WriteStarFig5aCSV
	if fig == "5b" {
		write = WriteStarFig5bCSV
	}
	if err := write(f, ps); err != nil {
		f.Close()
		return "", err
	}
	return csvPath, f.Close()
}

// ReadStarCSV reads what WriteStarFig5aCSV or WriteStarFig5bCSV wrote
// and says which figure it holds ("5a" or "5b").
func ReadStarCSV(r io.Reader) (fig string, points []StarPoint, err error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return "", nil, fmt.Errorf("sweep: StaR CSV: %w", err)
	}
	if len(rows) == 0 || len(rows[0]) < 3 || rows[0][0] != "mode" || rows[0][1] != "connections" || rows[0][2] != "msg_rate" && rows[0][2] != "call_rate" {
		return "", nil, fmt.Errorf("sweep: StaR CSV: the header is not mode,connections,msg_rate|call_rate,...")
	}
	fig = "5a"
	if rows[0][2] == "call_rate" {
		fig = "5b"
	}
	var ps []StarPoint
	for i, row := range rows[1:] {
		if len(row) != len(rows[0]) {
			return "", nil, fmt.Errorf("sweep: StaR CSV line %d: %d fields, want %d", i+2, len(row), len(rows[0]))
		}
		n, err1 := strconv.Atoi(row[1])
		rate, err2 := strconv.ParseFloat(row[2], 64)
		if err1 != nil || err2 != nil || n < 1 || rate < 0 {
			return "", nil, fmt.Errorf("sweep: StaR CSV line %d: bad connections or rate", i+2)
		}
		p := StarPoint{Mode: row[0], Connections: n, MsgRate: rate}
		if len(row) >= 5 {
			m, _ := strconv.ParseUint(row[3], 10, 64)
			b, _ := strconv.Atoi(row[4])
			p.Misses, p.OnChipPeak = m, b
		}
		ps = append(ps, p)
	}
	return fig, ps, nil
}

// StaR's Fig. 5b (StaR §4.2), the RPC test: each client calls the server
// over its own long-lived connection, a 2.8 KB request SENT to the server
// and a 1.4 KB response SENT back once the request arrived (no
// computation), and calls again as soon as its response arrived; every
// RECV is posted before the SEND it takes. The setup is Fig. 5a's, with
// path MTU 2048 (the paper's MSS is 1.4 KB; an RoCE path MTU is a power
// of two, and 2048 is the smallest that carries a response in one packet,
// as the paper's MSS does). The server signals one response in
// StarRPCSignal, as RPC servers and perftest do (the others retire with
// it), in both modes. The call rate is counted at the clients (a call
// ends when its response arrived).

// StarFig5bCounts are the connection counts of the RPC sweep.
var StarFig5bCounts = []int{1, 10, 50, 100, 200, 280, 300, 400, 500, 1000, 2000, 5000}

// RPC sizes of StaR §4.2.
const (
	StarRPCRequest  = 2800
	StarRPCResponse = 1400
	// StarRPCSignal: the server signals every StarRPCSignal-th response
	// of a connection.
	StarRPCSignal = 16
)

// RunStarFig5b runs one point of the RPC test.
func RunStarFig5b(mode string, n int, measure time.Duration, maxCalls uint64) (StarPoint, error) {
	c, err := StarFig5aConfig(mode, n, measure, maxCalls)
	if err != nil {
		return StarPoint{}, err
	}
	fail := func(err error) (StarPoint, error) {
		return StarPoint{}, fmt.Errorf("sweep: StaR Fig. 5b, %s, %d connections: %w", mode, n, err)
	}
	cfg := sim.Config{Seed: c.Seed, AtoB: c.Link, BtoA: c.Link, SchemeA: c.Scheme, SchemeB: c.Scheme, SchemeParams: c.Params,
		SRAMBytesB: c.SRAM, FetchPenalty: c.Penalty, StarServerB: c.Star}
	s, err := sim.New(cfg)
	if err != nil {
		return fail(err)
	}
	roleA, roleB := dataplane.StarNone, dataplane.StarNone
	if c.Star {
		roleA, roleB = dataplane.StarClient, dataplane.StarServer
	}
	const slots = 64 // buffers shared by the connections: the data is not checked here
	pdA, pdB := s.A.AllocPD(), s.B.AllocPD()
	mrA, err := s.A.RegMR(pdA, make([]byte, slots*(StarRPCRequest+StarRPCResponse)), 0, qp.AccessLocalWrite)
	if err != nil {
		return fail(err)
	}
	mrB, err := s.B.RegMR(pdB, make([]byte, slots*(StarRPCRequest+StarRPCResponse)), 0, qp.AccessLocalWrite)
	if err != nil {
		return fail(err)
	}
	cqA, _ := s.A.CreateCQ(2*n+64, nil)
	cqB, _ := s.B.CreateCQ(2*n+64, nil)
	qa := make([]*dataplane.QP, n)
	qb := make([]*dataplane.QP, n)
	sge := func(m *dataplane.MR, off, size int) qp.SGE {
		return qp.SGE{Addr: m.Addr + uint64(off), Length: uint32(size), LKey: m.LKey}
	}
	req := func(i int) []qp.SendWR {
		w := qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, Flags: qp.SendSignaled, NumSGE: 1}
		w.SGL[0] = sge(mrA, (i%slots)*StarRPCRequest, StarRPCRequest)
		return []qp.SendWR{w}
	}
	responses := make([]int, n)
	resp := func(i int) []qp.SendWR {
		w := qp.SendWR{WRID: uint64(i), Opcode: qp.WRSend, NumSGE: 1}
		if responses[i]++; responses[i]%StarRPCSignal == 0 {
			w.Flags = qp.SendSignaled
		}
		w.SGL[0] = sge(mrB, slots*StarRPCRequest+(i%slots)*StarRPCResponse, StarRPCResponse)
		return []qp.SendWR{w}
	}
	recvA := func(i int) []qp.RecvWR {
		w := qp.RecvWR{WRID: uint64(i), NumSGE: 1}
		w.SGL[0] = sge(mrA, slots*StarRPCRequest+(i%slots)*StarRPCResponse, StarRPCResponse)
		return []qp.RecvWR{w}
	}
	recvB := func(i int) []qp.RecvWR {
		w := qp.RecvWR{WRID: uint64(i), NumSGE: 1}
		w.SGL[0] = sge(mrB, (i%slots)*StarRPCRequest, StarRPCRequest)
		return []qp.RecvWR{w}
	}
	for i := 0; i < n; i++ {
		if qa[i], err = s.A.CreateQP(pdA, dataplane.QPInitAttr{SendCQ: cqA, RecvCQ: cqA, MaxSendWR: 4, MaxRecvWR: 2, Star: roleA}); err != nil {
			return fail(err)
		}
		if qb[i], err = s.B.CreateQP(pdB, dataplane.QPInitAttr{SendCQ: cqB, RecvCQ: cqB, MaxSendWR: 2 * StarRPCSignal, MaxRecvWR: 2, Star: roleB}); err != nil {
			return fail(err)
		}
		if err := dataplane.Connect(s.A, qa[i], s.B, qb[i], dataplane.ConnParams{MTU: qp.MTU2048, Timeout: 12}); err != nil {
			return fail(err)
		}
	}
	for i := 0; i < n; i++ {
		if _, err := s.B.PostRecv(qb[i], recvB(i)); err != nil {
			return fail(err)
		}
		if _, err := s.A.PostRecv(qa[i], recvA(i)); err != nil {
			return fail(err)
		}
		if _, err := s.A.PostSend(qa[i], req(i)); err != nil {
			return fail(err)
		}
	}
	wcs := make([]qp.WC, 256)
	var calls uint64
	var runErr error
	// serve answers every request that arrived and starts the next call
	// of every client whose response arrived.
	serve := func() bool {
		for {
			got := 0
			k, err := s.B.PollCQ(cqB, wcs)
			if err != nil {
				runErr = err
				return true
			}
			got += k
			for _, wc := range wcs[:k] {
				if wc.Status != qp.WCSuccess {
					runErr = fmt.Errorf("server QP %d: %v %v", wc.WRID, wc.Opcode, wc.Status)
					return true
				}
				if wc.Opcode == qp.WCRecv {
					i := int(wc.WRID)
					if _, err := s.B.PostRecv(qb[i], recvB(i)); err != nil {
						runErr = err
						return true
					}
					if _, err := s.B.PostSend(qb[i], resp(i)); err != nil {
						runErr = err
						return true
					}
				}
			}
			k, err = s.A.PollCQ(cqA, wcs)
			if err != nil {
				runErr = err
				return true
			}
			got += k
			for _, wc := range wcs[:k] {
				if wc.Status != qp.WCSuccess {
					runErr = fmt.Errorf("client QP %d: %v %v", wc.WRID, wc.Opcode, wc.Status)
					return true
				}
				if wc.Opcode == qp.WCRecv {
					calls++
					i := int(wc.WRID)
					if _, err := s.A.PostRecv(qa[i], recvA(i)); err != nil {
						runErr = err
						return true
					}
					if _, err := s.A.PostSend(qa[i], req(i)); err != nil {
						runErr = err
						return true
					}
				}
			}
			if got == 0 {
				return false
			}
		}
	}
	// The clients and the server react to a completion the moment it is
	// there (RunUntilReact), not at the next event.
	run := func(d time.Duration, max uint64) {
		end, stop := s.Now()+d, calls+max
		cond := func() bool { return serve() || s.Now() >= end || (max > 0 && calls >= stop) }
		for !cond() {
			before, at := calls, s.Now()
			if s.RunUntilReact(cond, d+time.Second) || calls == before && s.Now() == at {
				return
			}
		}
	}
	run(c.Warmup, maxCalls/2)
	startCalls, startCache := calls, s.B.CacheStats()
	t0 := s.Now()
	run(c.Measure, maxCalls)
	if runErr != nil {
		return fail(runErr)
	}
	cs := s.B.CacheStats()
	return StarPoint{Mode: mode, Connections: n, MsgRate: float64(calls-startCalls) / (s.Now() - t0).Seconds(),
		Misses: cs.Misses - startCache.Misses, OnChipPeak: cs.PeakResidentBytes}, nil
}
