package sweep

import (
	"encoding/csv"
	"fmt"
	"io"
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
}

// TimeoutOf is the ACK timeout an exponent stands for.
func TimeoutOf(code uint8) time.Duration { return time.Duration(4096<<code) * time.Nanosecond }

// RunIGBN measures one point on the embedded fabric in simulated time.
func RunIGBN(c IGBNConfig) (IGBNResult, error) {
	link := perftest.Link{RateBps: IGBNLinkBps, Delay: IGBNOneWayDelay, Loss: c.Loss, Ring: perftest.DefaultLink.Ring}
	o := perftest.Options{Size: IGBNMessageSize, Iters: c.Messages, TxDepth: 1, MTU: qp.MTU1024, Scheme: c.Scheme, Seed: c.Seed,
		Timeout: c.Timeout, Params: recovery.Params{NakInterval: IGBNNakInterval, AckReqInterval: IGBNAckReqInterval}}
	r, err := perftest.WriteBWEmbedded(o, link)
	if err != nil {
		return IGBNResult{}, fmt.Errorf("%s at %g%% loss, timeout %v: %w", c.Scheme, c.Loss*100, TimeoutOf(c.Timeout), err)
	}
	a := r.A
	return IGBNResult{IGBNConfig: c, Gbps: r.AvgGbps, Elapsed: r.Elapsed, Retransmits: a.Retransmits, Timeouts: a.LocalAckTimeout,
		Reasons:      [4]uint64{a.AckTimeoutLastLost, a.AckTimeoutAckLost, a.AckTimeoutNakLost, a.AckTimeoutLostTwice},
		Unclassified: a.LocalAckTimeout - a.AckTimeoutLastLost - a.AckTimeoutAckLost - a.AckTimeoutNakLost - a.AckTimeoutLostTwice,
		STSkipped:    a.STCopySkipped, Wall: r.Wall}, nil
}

// RelativizeIGBN fills Relative from each scheme's lossless point at the
// same timeout.
func RelativizeIGBN(rs []IGBNResult) {
	type key struct {
		s string
		t uint8
	}
	base := map[key]float64{}
	for _, r := range rs {
		if r.Loss == 0 {
			base[key{r.Scheme, r.Timeout}] = r.Gbps
		}
	}
	for i := range rs {
		if b := base[key{rs[i].Scheme, rs[i].Timeout}]; b > 0 {
			rs[i].Relative = rs[i].Gbps / b
		}
	}
}

// WriteIGBNCSV writes the rows: scheme, loss (a fraction), relative
// goodput first, as docs/results/igbn-fig6a.csv has them.
func WriteIGBNCSV(w io.Writer, rs []IGBNResult) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"scheme", "loss", "relative", "timeout_us", "messages", "goodput_gbps", "retransmits", "ack_timeouts",
		"timeout_last_lost", "timeout_ack_lost", "timeout_nak_lost", "timeout_lost_twice", "timeout_other", "st_copy_skipped"})
	for _, r := range rs {
		row := []string{r.Scheme, strconv.FormatFloat(r.Loss, 'g', -1, 64), strconv.FormatFloat(r.Relative, 'f', 4, 64),
			strconv.FormatInt(TimeoutOf(r.Timeout).Microseconds(), 10), strconv.Itoa(r.Messages),
			strconv.FormatFloat(r.Gbps, 'f', 3, 64), strconv.FormatUint(r.Retransmits, 10), strconv.FormatUint(r.Timeouts, 10)}
		for _, n := range r.Reasons {
			row = append(row, strconv.FormatUint(n, 10))
		}
		row = append(row, strconv.FormatUint(r.Unclassified, 10), strconv.FormatUint(r.STSkipped, 10))
		cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
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
