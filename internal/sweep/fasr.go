package sweep

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// FaSR's Fig. 7c (FaSR §V-C2) with the paper's setup: 5K concurrent QPs
// between a server and its clients on a 100 Gb/s switch, a base RTT of
// about 6 µs, a 1024-byte MTU, perftest's WRITEs of 8 KB (§V-B), loss
// injected on the switch in both directions. The commodity NIC (CX6-DX) runs
// go-back-N and holds about 256 contexts on chip (its Fig. 7b knee: "when
// the number of QPs exceeds 256, CX6 suffers a drop"); FaSR holds every
// context in its 1.4 MB (§V-A), SRNIC too (its bitmaps are in host
// memory), IRN+ (§V-A: IRN with SRNIC's WQEs in host memory) about half.
// The CX6-like NIC's transmit scheduler arbitrates among its QPs packet by
// packet (TxBurst 1), so with its contexts not fitting it misses on nearly
// every packet, as the paper's "frequent cache misses" say; the FPGA NICs
// schedule a WQE (a whole 8 KiB WRITE) per turn, so IRN+'s misses are
// amortised over its 8 packets (FasrFig7cTurn, FasrFig7cConfig's burst
// argument). Every NIC has the per-frame service time at the line rate
// (dataplane.Config.ServiceRate), so a miss or SRNIC's bitmap query is
// lost pipeline time.

// CX6Contexts is how many go-back-N contexts the CX6-like NIC holds.
const CX6Contexts = 256

// CX6Budget is the on-chip bytes that hold CX6Contexts go-back-N
// contexts: the base context plus go-back-N's own per-QP state, as the
// recovery package charges it.
func CX6Budget() int {
	s, err := recovery.New(recovery.GBN, recovery.Params{})
	if err != nil {
		panic(err)
	}
	return CX6Contexts * (qp.DefaultQPContextBytes + s.NewSender().OnChipBytes() + s.NewReceiver().OnChipBytes())
}

// FasrFig7cNIC is one curve of Fig. 7c: a NIC, the scheme it runs and its
// on-chip budget.
type FasrFig7cNIC struct {
	Name   string // the CSV's scheme column: "gbn" (the CX6-like NIC), "srnic", "irn" or "fasr"
	Scheme string
	SRAM   int
}

// FasrFig7cNICs are the figure's four curves: the CX6-like NIC and the
// three NICs the paper built on one FPGA stack (§V-A), each with FaSR's
// 1.4 MB for contexts. irn is the paper's IRN+ (WQEs in host memory, so
// its contexts are the 256 B base, IRN's 20 B of SR state and five
// bitmaps of the 500-packet BDP cap: 589 B, of which 2,376 fit), srnic
// 256 B plus its 12 B (all 5000 fit; its bitmaps are in host memory, a
// query stalls the pipeline), fasr 256 B plus its 1 B pointer and shared
// pools.
func FasrFig7cNICs() []FasrFig7cNIC {
	return []FasrFig7cNIC{{"gbn", recovery.GBN, CX6Budget()}, {"srnic", recovery.SRNIC, FaSRBudget},
		{"irn", recovery.IRN, FaSRBudget}, {"fasr", recovery.FaSR, FaSRBudget}}
}

// FasrFig7cTurn is the packets nic's transmit scheduler sends per QP turn
// in the figure: the CX6-like NIC arbitrates among its QPs packet by
// packet (see above); the FPGA NICs schedule WQEs (SRNIC's architecture,
// which IRN+ adopts; FaSR's scheduler fetches WQEs in batches, §V-D1), and
// a QP's turn is its 8 KiB WRITE, 8 packets of MTU 1024.
func FasrFig7cTurn(nic FasrFig7cNIC) int {
	if nic.Scheme == recovery.GBN {
		return 1
	}
	return 8
}

// FasrFig7cParams are the schemes' knobs in Fig. 7c: Fig. 7a's BDP cap of
// 500 packets (which sizes IRN's five bitmaps, §II) and SRNIC's 1.4 µs
// bitmap query (FasrFig7aParams), with the schemes' own fixed timeouts
// (RTO_low/RTO_high 100/320 µs; Fig. 7a's 18 µs is for one QP, and 5000
// QPs' messages wait longer than that in the port's queue).
func FasrFig7cParams() recovery.Params {
	p := FasrFig7aParams()
	p.RTOHigh, p.RTOLow = 0, 0
	return p
}

// FasrFig7cLosses are the loss rates of the figure (fractions). The
// paper's text does not list its x-axis points; these span its 0-1%.
var FasrFig7cLosses = []float64{0, 0.001, 0.005, 0.01}

// FasrFig7cConfig returns one point: nic at loss with qps QPs. burst is
// the transmit scheduler's packets per QP turn (1: per packet).
func FasrFig7cConfig(nic FasrFig7cNIC, qps int, loss float64, burst int, warmup, measure time.Duration) QPConfig {
	link := DefaultQPLink
	link.Delay = 3 * time.Microsecond // §V-A: base RTT about 6 µs
	return QPConfig{Scheme: nic.Scheme, QPs: qps, Size: 8192, Loss: loss, SRAM: nic.SRAM, Penalty: qp.DefaultFetchPenalty,
		Link: link, Warmup: warmup, Measure: measure, Seed: uint64(qps) + 7, MTU: qp.MTU1024, TxBurst: burst,
		// perftest's default local ACK timeout, 14 (67 ms), for every
		// NIC; the selective schemes' timeouts are their own
		// (FasrFig7cParams).
		Timeout: 14, Params: FasrFig7cParams(),
		// Every NIC's pipelines run at the line rate (as Fig. 7a's): a
		// context fetch or a bitmap query is lost time.
		ServiceRate: uint64(link.RateBps), NICRate: uint64(link.RateBps)}
}

// FasrFig7cPoint is one measured point.
type FasrFig7cPoint struct {
	NIC         string
	Loss        float64
	GoodputGbps float64
	MsgRate     float64
	HitRate     float64
	Retransmits uint64
	Wall        time.Duration
}

// RunFasrFig7c measures one point.
func RunFasrFig7c(nic FasrFig7cNIC, qps int, loss float64, burst int, warmup, measure time.Duration) (FasrFig7cPoint, error) {
	r, err := RunQPs(FasrFig7cConfig(nic, qps, loss, burst, warmup, measure))
	if err != nil {
		return FasrFig7cPoint{}, fmt.Errorf("sweep: FaSR Fig. 7c, %s at %g%% loss: %w", nic.Name, loss*100, err)
	}
	return FasrFig7cPoint{NIC: nic.Name, Loss: loss, GoodputGbps: r.GoodputGbps, MsgRate: r.MsgRate, HitRate: r.HitRate, Retransmits: r.Retransmits, Wall: r.Wall}, nil
}

// WriteFasrFig7cCSV writes docs/results/fasr-fig7c.csv: scheme, loss (a
// fraction), goodput_gbps.
func WriteFasrFig7cCSV(w io.Writer, ps []FasrFig7cPoint) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"scheme", "loss", "goodput_gbps"})
	for _, p := range ps {
		cw.Write([]string{p.NIC, strconv.FormatFloat(p.Loss, 'g', -1, 64), strconv.FormatFloat(p.GoodputGbps, 'f', 3, 64)})
	}
	cw.Flush()
	return cw.Error()
}

// SaveFasrFig7c writes <dir>/<name>.csv and returns its path.
func SaveFasrFig7c(dir, name string, ps []FasrFig7cPoint) (string, error) {
	return saveCSV(dir, name+".csv", func(w io.Writer) error { return WriteFasrFig7cCSV(w, ps) })
}

// FaSR's deep dive (§V-D): how often its SR operations take the fast path
// (no bitmap, Fig. 9b) and how much of its shared bitmap pool the
// receiver uses (Fig. 10, NS3 in the paper: 100 Gb/s server links, a
// 40 µs base RTT, MTU 1 KB, 1% loss, a 270-byte bitmap pool). Here: fasr
// on both NICs, the FaSR budget, the recovery package's pools (128
// bitmap blocks of 16 bits, 256 B, and 32 SR units), qps QPs from A to B
// sharing the link, together keeping 512 packets of WRITEs outstanding
// (the paper's BDP of 500; FasrDiveWorkload), each QP capped at the BDP
// cap of 128 packets.

// FasrDivePoint is one point of Fig. 9b/10.
type FasrDivePoint struct {
	QPs         int
	Loss        float64
	GoodputGbps float64
	// Operations of the receiver (B) and sender (A) in the measurement
	// window, with (slow) and without (fast) a bitmap.
	RxFast, RxSlow, TxFast, TxSlow uint64
	// BlocksPeak and UnitsPeak are the most bitmap blocks and SR units
	// B held at once; BlockBits the bits of a block.
	BlocksPeak, BlocksSlots, UnitsPeak, UnitsSlots, BlockBits int
	Fallbacks                                                 uint64
	Wall                                                      time.Duration
}

// FastShare is the fast path's share of all SR operations, both ends.
func (p FasrDivePoint) FastShare() float64 {
	all := p.RxFast + p.RxSlow + p.TxFast + p.TxSlow
	if all == 0 {
		return 0
	}
	return float64(p.RxFast+p.TxFast) / float64(all)
}

// FasrDiveInFlight is the packets all QPs of Fig. 9b/10 keep outstanding
// together: about the paper's BDP of 500 packets (100 Gb/s, 40 µs, 1 KB).
const FasrDiveInFlight = 512

// FasrDiveWorkload is what each of qps QPs keeps outstanding so that
// together they hold FasrDiveInFlight packets of MTU 1024: 8 KiB WRITEs
// (8 packets), FasrDiveInFlight/8/qps of them, while that is at least one
// (up to 64 QPs); past that one WRITE each, of FasrDiveInFlight/qps
// packets (4 KiB at 128 QPs, 1 KiB at 512), and never less than one
// packet, so past 512 QPs the total is one packet per QP.
func FasrDiveWorkload(qps int) (depth, size int) {
	const mtu, msg = 1024, 8192
	pkts := max(1, FasrDiveInFlight/max(1, qps)) // per QP
	if pkts >= msg/mtu {
		return pkts / (msg / mtu), msg
	}
	return 1, pkts * mtu
}

// FasrDiveConfig returns one point's configuration.
func FasrDiveConfig(qps int, loss float64, warmup, measure time.Duration) QPConfig {
	link := DefaultQPLink
	link.Delay = 20 * time.Microsecond // §V-D3: base RTT 40 µs
	link.QueueFrames = 4096
	depth, size := FasrDiveWorkload(qps)
	return QPConfig{Scheme: recovery.FaSR, QPs: qps, Size: size, Loss: loss, SRAM: FaSRBudget, Penalty: qp.DefaultFetchPenalty,
		Link: link, Warmup: warmup, Measure: measure, Seed: uint64(qps) + 11, MTU: qp.MTU1024, Depth: depth, Timeout: 14}
}

// RunFasrDive measures one point.
func RunFasrDive(qps int, loss float64, warmup, measure time.Duration) (FasrDivePoint, error) {
	r, err := RunQPs(FasrDiveConfig(qps, loss, warmup, measure))
	if err != nil {
		return FasrDivePoint{}, fmt.Errorf("sweep: FaSR Fig. 9/10, %d QPs at %g%% loss: %w", qps, loss*100, err)
	}
	p := FasrDivePoint{QPs: qps, Loss: loss, GoodputGbps: r.GoodputGbps, RxFast: r.RxFast, RxSlow: r.RxSlow, TxFast: r.TxFast, TxSlow: r.TxSlow,
		Fallbacks: r.Fallbacks, Wall: r.Wall, BlockBits: recovery.DefaultFasrBlockBits}
	for _, ps := range r.ServerPools {
		switch ps.Name {
		case "fasr_bitmap_blocks":
			p.BlocksPeak, p.BlocksSlots = ps.Peak, ps.Slots
		case "fasr_sr_units":
			p.UnitsPeak, p.UnitsSlots = ps.Peak, ps.Slots
		}
	}
	return p, nil
}

// WriteFasrDiveCSV writes the points: qps, loss, the four path counts,
// the fast share, the pools' peaks and sizes, fallbacks and goodput.
func WriteFasrDiveCSV(w io.Writer, ps []FasrDivePoint) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"qps", "loss", "rx_fast", "rx_slow", "tx_fast", "tx_slow", "fast_share", "bitmap_blocks_peak", "bitmap_bytes_peak", "bitmap_blocks", "sr_units_peak", "sr_units", "fallbacks", "goodput_gbps"})
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	for _, p := range ps {
		cw.Write([]string{strconv.Itoa(p.QPs), strconv.FormatFloat(p.Loss, 'g', -1, 64), u(p.RxFast), u(p.RxSlow), u(p.TxFast), u(p.TxSlow),
			strconv.FormatFloat(p.FastShare(), 'f', 4, 64), strconv.Itoa(p.BlocksPeak), strconv.Itoa(p.BlocksPeak * p.BlockBits / 8), strconv.Itoa(p.BlocksSlots),
			strconv.Itoa(p.UnitsPeak), strconv.Itoa(p.UnitsSlots), u(p.Fallbacks), strconv.FormatFloat(p.GoodputGbps, 'f', 3, 64)})
	}
	cw.Flush()
	return cw.Error()
}

// SaveFasrDive writes <dir>/<name>.csv and returns its path.
func SaveFasrDive(dir, name string, ps []FasrDivePoint) (string, error) {
	return saveCSV(dir, name+".csv", func(w io.Writer) error { return WriteFasrDiveCSV(w, ps) })
}
