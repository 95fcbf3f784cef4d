package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/internal/sweep"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

func sweepCmd(args []string) error {
	if len(args) > 0 && args[0] == "loss" {
		return lossSweepCmd(args[1:])
	}
	if len(args) == 0 || args[0] != "qps" {
		return errors.New("sweep: usage: softnic sweep qps|loss [flags] (see softnic sweep qps -h)")
	}
	fs := flag.NewFlagSet("sweep qps", flag.ContinueOnError)
	out := fs.String("out", "results", "directory for qps.csv and the PNG plots")
	schemes := fs.String("schemes", strings.Join(recovery.Names(), ","), "recovery schemes")
	qpList := fs.String("qps", "1,2,4,8,16,32,64,128,200,256,290,300,400,512,1000,2000,5000", "QP counts")
	sizes := fs.String("sizes", "8,8192", "WRITE sizes: 8 (StaR's stress test) and 8192 (bulk)")
	losses := fs.String("loss", "0,1", "loss percentages, both directions")
	sram := fs.Int("sram", qp.DefaultCacheBudget, "on-chip SRAM per NIC, bytes (0 = unlimited)")
	penalty := fs.Duration("fetch-penalty", qp.DefaultFetchPenalty, "context-cache miss stall")
	measure := fs.Duration("measure", 40*time.Millisecond, "measurement window per point (simulated), after a 20 ms warm-up")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ns, err := ints(*qpList)
	if err != nil {
		return err
	}
	ss, err := ints(*sizes)
	if err != nil {
		return err
	}
	var ls []float64
	for _, f := range strings.Split(*losses, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return fmt.Errorf("sweep: loss %q: %v", f, err)
		}
		ls = append(ls, v/100)
	}
	fmt.Printf(" QP scalability sweep (StaR stress test) on the embedded fabric, simulated time\n")
	fmt.Printf(" link 100 Gb/s, RTT 12 µs; SRAM %d B per NIC, %d-byte base context, miss stall %v\n", *sram, qp.DefaultQPContextBytes, *penalty)
	fmt.Printf(" %-6s %6s %6s %6s %12s %9s %8s %9s %8s\n", "scheme", "size", "loss%", "QPs", "msgs/s", "Gb/s", "hit", "SR bytes", "CPU")
	var rs []sweep.QPResult
	for _, scheme := range strings.Split(*schemes, ",") {
		for _, size := range ss {
			for _, loss := range ls {
				for _, n := range ns {
					r, err := sweep.RunQPs(sweep.QPConfig{Scheme: strings.TrimSpace(scheme), QPs: n, Size: size, Loss: loss, SRAM: *sram,
						Penalty: *penalty, Link: sweep.DefaultQPLink, Warmup: 20 * time.Millisecond, Measure: *measure, Seed: uint64(n),
						// One retransmission timeout for every scheme, the
						// QPs' ACK timeout: past the cache's knee a QP waits
						// milliseconds for its turn in the NIC, and IRN's
						// 100/320 µs RTOs would fire spuriously until its
						// retries ran out (found by this sweep).
						Params: recovery.Params{RTOLow: sweepTimeout, RTOHigh: sweepTimeout}})
					if err != nil {
						return err
					}
					fmt.Printf(" %-6s %6d %6g %6d %12.0f %9.3f %8.3f %9d %8v\n", r.Scheme, size, loss*100, n, r.MsgRate, r.GoodputGbps, r.HitRate, r.SRBytes, r.Wall.Round(time.Millisecond))
					rs = append(rs, r)
				}
			}
		}
	}
	files, err := sweep.SaveQPs(*out, rs)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stdout, " wrote", strings.Join(files, " "))
	return nil
}

// sweepTimeout is the ACK timeout of the QP sweep's QPs (code 12).
const sweepTimeout = 16777216 * time.Nanosecond

func ints(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("sweep: %q is not a positive integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// lossSweepCmd runs write_bw for every scheme at every loss rate on the
// embedded fabric (simulated time) and plots goodput relative to each
// scheme's lossless run.
func lossSweepCmd(args []string) error {
	fs := flag.NewFlagSet("sweep loss", flag.ContinueOnError)
	out := fs.String("out", "results", "directory for loss.csv and loss.png")
	schemes := fs.String("schemes", strings.Join(recovery.Names(), ","), "recovery schemes")
	losses := fs.String("loss", "0,0.01,0.1,0.5,1,2,5", "loss percentages, both directions")
	size := fs.Int("s", 65536, "WRITE size")
	iters := fs.Int("n", 3000, "WRITEs per point")
	depth := fs.Int("t", 128, "tx depth")
	mtu := fs.Int("m", 1024, "path MTU")
	rate := fs.Float64("rate", perftest.DefaultLink.RateBps/1e9, "link rate, Gb/s")
	delay := fs.Duration("delay", perftest.DefaultLink.Delay, "one-way delay")
	if err := fs.Parse(args); err != nil {
		return err
	}
	m, err := qp.MTUFromBytes(*mtu)
	if err != nil {
		return err
	}
	link := perftest.DefaultLink
	link.RateBps, link.Delay = *rate*1e9, *delay
	fmt.Printf(" loss sweep on the embedded fabric, simulated time: %.0f Gb/s, one-way %v, TX ring %d, MTU %d, %d x %d B, depth %d\n",
		*rate, *delay, link.Ring, *mtu, *iters, *size, *depth)
	fmt.Printf(" %-6s %7s %9s %9s %12s %9s %8s\n", "scheme", "loss%", "Gb/s", "relative", "retransmits", "timeouts", "CPU")
	var rs []sweep.LossResult
	for _, scheme := range strings.Split(*schemes, ",") {
		var base float64
		for _, f := range strings.Split(*losses, ",") {
			pct, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return fmt.Errorf("sweep: loss %q: %v", f, err)
			}
			r, err := sweep.RunLoss(sweep.LossConfig{Scheme: strings.TrimSpace(scheme), Loss: pct / 100, Size: *size, Iters: *iters,
				TxDepth: *depth, MTU: m, Link: link, Seed: 1})
			if err != nil {
				return err
			}
			if pct == 0 {
				base = r.Gbps
			}
			rel := 0.0
			if base > 0 {
				rel = r.Gbps / base
			}
			fmt.Printf(" %-6s %7g %9.3f %9.3f %12d %9d %8v\n", r.Scheme, pct, r.Gbps, rel, r.Retransmits, r.Timeouts, r.Wall.Round(time.Millisecond))
			rs = append(rs, r)
		}
	}
	sweep.Relativize(rs)
	files, err := sweep.SaveLoss(*out, rs)
	if err != nil {
		return err
	}
	fmt.Println(" wrote", strings.Join(files, " "))
	return nil
}
