package sweep

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// The Improved go-back-N paper's simulation (Table I): 40 Gb/s links, 1 µs
// of propagation per hop on the two hops of Fig. 1, non-pipelined 4 MB
// messages of 1 KB packets, an ACK requested every 256 KB, a 500 µs NAK
// interval.
const (
	IGBNMessageSize    = 4 << 20
	IGBNLinkBps        = 40e9
	IGBNOneWayDelay    = 2 * time.Microsecond
	IGBNAckReqInterval = 256
	IGBNNakInterval    = 500 * time.Microsecond
)

// IGBNSchemes are the four algorithms of the paper's Figs. 6 and 7, worst
// first as the paper ranks them.
var IGBNSchemes = []string{recovery.GBN, recovery.GBNST, recovery.GBNCE, recovery.IGBN}

// IGBNConfig is one point of the paper's Fig. 6/7 workload: one QP
// writing Messages messages of 4 MB one at a time (the next is posted when
// the previous completes), at Loss in both directions.
type IGBNConfig struct {
	Scheme   string
	Loss     float64
	Timeout  uint8 // local ACK timeout exponent: 4.096 µs * 2^Timeout
	Messages int
	Seed     uint64
	// Ring and NakInterval, when not 0, replace the link's queue
	// (perftest.DefaultLink.Ring frames each way) and Table I's NAK
	// interval: the knobs of the go-back cost (TestIGBNGoBackCost).
	Ring        int
	NakInterval time.Duration
}

// IGBNResult is one measured point. Reasons counts the ACK timeouts by the
// paper's four reasons (Fig. 3), in its order: last packet lost, ACK of the
// last packet lost, NAK lost, a packet lost twice; Unclassified the rest.
type IGBNResult struct {
	IGBNConfig
	Gbps         float64
	Relative     float64 // over the same scheme's lossless goodput
	Elapsed      time.Duration
	Retransmits  uint64
	Timeouts     uint64
	Reasons      [4]uint64
	Unclassified uint64
	STSkipped    uint64
	Wall         time.Duration
	// What a go-back costs: packets the requester sent (first copies,
	// ST's second copies and resends), sequence NAKs the responder sent
	// and the requester received, go-backs on a NAK repeating the last
	// one (go_back_free), requests the responder dropped out of sequence.
	SentPkts, NaksSent, NaksRcvd, GoBackFree, OutOfSeq uint64
}

// TimeoutOf is the ACK timeout an exponent stands for.
func TimeoutOf(code uint8) time.Duration { return time.Duration(4096<<code) * time.Nanosecond }

// RunIGBN measures one point on the embedded fabric in simulated time.
func RunIGBN(c IGBNConfig) (IGBNResult, error) {
	ring, nak := perftest.DefaultLink.Ring, IGBNNakInterval
	if c.Ring != 0 {
		ring = c.Ring
	}
	if c.NakInterval != 0 {
		nak = c.NakInterval
	}
	link := perftest.Link{RateBps: IGBNLinkBps, Delay: IGBNOneWayDelay, Loss: c.Loss, Ring: ring}
	o := perftest.Options{Size: IGBNMessageSize, Iters: c.Messages, TxDepth: 1, MTU: qp.MTU1024, Scheme: c.Scheme, Seed: c.Seed,
		Timeout: c.Timeout, Params: recovery.Params{NakInterval: nak, AckReqInterval: IGBNAckReqInterval}}
	r, err := perftest.WriteBWEmbedded(o, link)
	if err != nil {
		return IGBNResult{}, fmt.Errorf("%s at %g%% loss, timeout %v: %w", c.Scheme, c.Loss*100, TimeoutOf(c.Timeout), err)
	}
	a := r.A
	return IGBNResult{IGBNConfig: c, Gbps: r.AvgGbps, Elapsed: r.Elapsed, Retransmits: a.Retransmits, Timeouts: a.LocalAckTimeout,
		Reasons:      [4]uint64{a.AckTimeoutLastLost, a.AckTimeoutAckLost, a.AckTimeoutNakLost, a.AckTimeoutLostTwice},
		Unclassified: a.LocalAckTimeout - a.AckTimeoutLastLost - a.AckTimeoutAckLost - a.AckTimeoutNakLost - a.AckTimeoutLostTwice,
		STSkipped:    a.STCopySkipped, Wall: r.Wall,
		SentPkts: a.SentPkts, NaksSent: r.B.SeqNakSent, NaksRcvd: a.RcvdSeqErr, GoBackFree: a.GoBackFree, OutOfSeq: r.B.OutOfSeqRequest}, nil
}

// RelativizeIGBN fills Relative from each scheme's lossless point at the
// same timeout and seed.
func RelativizeIGBN(rs []IGBNResult) {
	type key struct {
		s    string
		t    uint8
		seed uint64
	}
	base := map[key]float64{}
	for _, r := range rs {
		if r.Loss == 0 {
			base[key{r.Scheme, r.Timeout, r.Seed}] = r.Gbps
		}
	}
	for i := range rs {
		if b := base[key{rs[i].Scheme, rs[i].Timeout, rs[i].Seed}]; b > 0 {
			rs[i].Relative = rs[i].Gbps / b
		}
	}
}

// WriteIGBNCSV writes the rows: scheme, loss (a fraction), relative
// goodput first, as docs/results/igbn-fig6a.csv has them.
func WriteIGBNCSV(w io.Writer, rs []IGBNResult) error {
	cw := csv.NewWriter(w)
	cw.Write(igbnColumns())
	for _, r := range rs {
		cw.Write(igbnRow(r))
	}
	cw.Flush()
	return cw.Error()
}

// igbnColumns are WriteIGBNCSV's columns, igbnRow one row of them.
func igbnColumns() []string {
	return []string{"scheme", "loss", "relative", "timeout_us", "messages", "goodput_gbps", "retransmits", "ack_timeouts",
		"timeout_last_lost", "timeout_ack_lost", "timeout_nak_lost", "timeout_lost_twice", "timeout_other", "st_copy_skipped"}
}

func igbnRow(r IGBNResult) []string {
	row := []string{r.Scheme, strconv.FormatFloat(r.Loss, 'g', -1, 64), strconv.FormatFloat(r.Relative, 'f', 4, 64),
		strconv.FormatInt(TimeoutOf(r.Timeout).Microseconds(), 10), strconv.Itoa(r.Messages),
		strconv.FormatFloat(r.Gbps, 'f', 3, 64), strconv.FormatUint(r.Retransmits, 10), strconv.FormatUint(r.Timeouts, 10)}
	for _, n := range r.Reasons {
		row = append(row, strconv.FormatUint(n, 10))
	}
	return append(row, strconv.FormatUint(r.Unclassified, 10), strconv.FormatUint(r.STSkipped, 10))
}

// SaveIGBN writes the rows to <dir>/<name>.csv and returns its path.
func SaveIGBN(dir, name string, rs []IGBNResult) (string, error) {
	return saveCSV(dir, name+".csv", func(w io.Writer) error { return WriteIGBNCSV(w, rs) })
}

// IGBNReasonNames are the paper's four reasons (Fig. 3), in its order, and
// IGBNPaperShares the shares it measured at 1% loss (§III-A).
var (
	IGBNReasonNames = []string{"last packet lost", "last ACK lost", "NAK lost", "lost twice"}
	IGBNPaperShares = []float64{0.071, 0.018, 0.571, 0.339}
)

// WriteIGBNReasonsCSV writes one row per reason: reason, timeouts, share
// of the classified timeouts, the paper's share; then the unclassified.
func WriteIGBNReasonsCSV(w io.Writer, r IGBNResult) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"reason", "timeouts", "share", "paper_share"})
	var sum uint64
	for _, n := range r.Reasons {
		sum += n
	}
	for i, n := range r.Reasons {
		share := 0.0
		if sum > 0 {
			share = float64(n) / float64(sum)
		}
		cw.Write([]string{IGBNReasonNames[i], strconv.FormatUint(n, 10), strconv.FormatFloat(share, 'f', 4, 64), strconv.FormatFloat(IGBNPaperShares[i], 'f', 3, 64)})
	}
	cw.Write([]string{"unclassified", strconv.FormatUint(r.Unclassified, 10), "", ""})
	cw.Flush()
	return cw.Error()
}

// SaveIGBNReasons writes <dir>/<name>.csv.
func SaveIGBNReasons(dir, name string, r IGBNResult) (string, error) {
	return saveCSV(dir, name+".csv", func(w io.Writer) error { return WriteIGBNReasonsCSV(w, r) })
}

// ReadIGBNCSV reads rows in igbn-fig6a.csv's columns (WriteIGBNCSV's, by
// header name): scheme, loss, relative and timeout_us are needed, the
// counters are read when present. timeout_us must be an IBA code's
// (4.096 µs * 2^k, as WriteIGBNCSV writes it).
func ReadIGBNCSV(r io.Reader) ([]IGBNResult, error) {
	t, err := readTable(r, "scheme", "loss", "relative", "timeout_us")
	if err != nil {
		return nil, err
	}
	var rs []IGBNResult
	for i, row := range t.rows {
		p := parser{t: t, row: row, n: i + 2}
		var res IGBNResult
		res.Scheme = t.get(row, "scheme")
		res.Loss = p.float("loss")
		res.Relative = p.float("relative")
		us := p.uint("timeout_us")
		res.Messages = p.int("messages")
		res.Gbps = p.float("goodput_gbps")
		res.Retransmits = p.uint("retransmits")
		res.Timeouts = p.uint("ack_timeouts")
		if p.err != nil {
			return nil, p.err
		}
		code, ok := timeoutCode(us)
		if !ok {
			return nil, fmt.Errorf("sweep: CSV line %d: timeout_us %d is no IBA ACK timeout (4.096 µs * 2^k)", i+2, us)
		}
		res.Timeout = code
		rs = append(rs, res)
	}
	return rs, nil
}

// timeoutCode is the ACK timeout exponent whose timeout is us µs (as
// TimeoutOf(k).Microseconds() gives it).
func timeoutCode(us uint64) (uint8, bool) {
	for k := uint8(0); k < 32; k++ {
		if uint64(TimeoutOf(k).Microseconds()) == us {
			return k, true
		}
	}
	return 0, false
}

// WriteIGBNFig7CSV writes the paper's Fig. 7 grouping of Fig. 6a-c's
// points: scheme, timeout_ms (the ACK timeout softnic used), loss (a
// fraction), relative; by scheme in IGBNSchemes' order, then timeout,
// longest first, then loss.
func WriteIGBNFig7CSV(w io.Writer, rs []IGBNResult) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"scheme", "timeout_ms", "loss", "relative"})
	for _, r := range SortIGBNFig7(rs) {
		cw.Write([]string{r.Scheme, strconv.FormatFloat(float64(TimeoutOf(r.Timeout).Microseconds())/1000, 'f', 3, 64),
			strconv.FormatFloat(r.Loss, 'g', -1, 64), strconv.FormatFloat(r.Relative, 'f', 4, 64)})
	}
	cw.Flush()
	return cw.Error()
}

// SortIGBNFig7 returns the points ordered as Fig. 7 groups them: by
// scheme (IGBNSchemes' order, others after), then timeout, longest first,
// then loss.
func SortIGBNFig7(rs []IGBNResult) []IGBNResult {
	rank := func(s string) int {
		for i, n := range IGBNSchemes {
			if n == s {
				return i
			}
		}
		return len(IGBNSchemes)
	}
	out := append([]IGBNResult(nil), rs...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ra, rb := rank(a.Scheme), rank(b.Scheme); ra != rb {
			return ra < rb
		}
		if a.Scheme != b.Scheme {
			return a.Scheme < b.Scheme
		}
		if a.Timeout != b.Timeout {
			return a.Timeout > b.Timeout
		}
		return a.Loss < b.Loss
	})
	return out
}

// SaveIGBNFig7 writes <dir>/<name>.csv in WriteIGBNFig7CSV's columns.
func SaveIGBNFig7(dir, name string, rs []IGBNResult) (string, error) {
	return saveCSV(dir, name+".csv", func(w io.Writer) error { return WriteIGBNFig7CSV(w, rs) })
}
