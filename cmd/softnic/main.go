// Command softnic is the softnic daemon and its tools:
//
//	softnic run     the daemon: one software RoCEv2 NIC on an interface
//	softnic stats   print a running daemon's counters
//	softnic switch  a RoCEv2-aware switch over AF_XDP between interfaces
//	softnic netem   show or change a running daemon's receive impairment
//	softnic demo    RDMA WRITE bandwidth on the embedded in-memory fabric
//	softnic sweep   runs softnic-sweep, the sweeps and their plots, which
//	                the daemon does not link (gonum/plot)
//	softnic version the version, commit and toolchain it was built from
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/softnic/softnic/internal/buildinfo"
	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCmd(os.Args[2:])
	case "stats":
		err = statsCmd(os.Args[2:])
	case "switch":
		err = switchCmd(os.Args[2:])
	case "netem":
		err = netemCmd(os.Args[2:])
	case "capture":
		err = captureCmd(os.Args[2:], os.Stdout, os.Stderr)
	case "sweep":
		err = sweepCmd(os.Args[2:])
	case "demo":
		switch err := demo(os.Args[2:]); {
		case err == nil, errors.Is(err, flag.ErrHelp):
		case errors.Is(err, errUsage):
			os.Exit(2)
		default:
			fmt.Fprintln(os.Stderr, "softnic demo:", err)
			os.Exit(1)
		}
	case "rules":
		err = rulesCmd(os.Args[2:], os.Stdout, os.Stderr)
	case "version", "--version", "-version":
		err = versionCmd(os.Args[2:], os.Stdout)
	case "-h", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "softnic: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	os.Exit(exitStatus(err, os.Stderr))
}

// exitStatus reports a command's error on stderr, in one line, and
// returns the exit status: 0 for none (or -h), 2 for a bad command line,
// as softnic-bench and most Unix tools, 1 for a failure.
func exitStatus(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		// The flag package printed the problem and the flags.
		return 2
	case errors.As(err, new(usageError)):
		fmt.Fprintln(stderr, "softnic:", oneLine(err))
		return 2
	default:
		fmt.Fprintln(stderr, "softnic:", oneLine(err))
		return 1
	}
}

// usageError is a bad command line the flag package let through: a value
// of the wrong kind (--mtu 8192), a flag missing, an argument too many.
// It exits with status 2; failures of a run exit with 1.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// parseFlags parses args into fs: flag.ErrHelp for -h, errUsage for
// anything else the flag package rejected (it printed the problem and
// the flags).
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return errUsage
}

// oneLine puts an error on one line: shutdown's joins one error per
// failed step (errors.Join), one per line, and any error ends in a
// one-line "softnic: ..." on stderr.
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: softnic <command> [flags]

commands:
  run     the daemon: attach the XDP steering program to an interface, bind
          AF_XDP sockets (or a UDP socket) and run one softnic NIC; see
          softnic run -h
  stats   print a running daemon's counters (softnic stats [--socket PATH])
  switch  a RoCEv2-aware switch over AF_XDP between interfaces: routing,
          ECN marking, PFC, pacing, event injection (softnic switch
          --port IF --port IF [...]; softnic switch -h); softnic stats
          --socket /run/softnic/switch.sock reads its counters
  netem   show or change a running daemon's receive impairment, in netem's
          words: softnic netem [--socket PATH] ["SPEC" | clear]
  capture tcpdump for a running daemon's NIC: softnic capture [-i SOCKET]
          [-w FILE|-] [-c COUNT] [-s SNAPLEN] [--qpn N] [--opcode NAME|NUM]
  demo    RDMA WRITE bandwidth between two embedded softnic NICs over the
          in-memory fabric (simulated time), lossless and lossy
  sweep   runs softnic-sweep (installed beside softnic or on PATH; in the
          source tree: go run ./cmd/softnic-sweep): parameter sweeps on
          the embedded fabric with CSV and PNG plots, softnic sweep qps
          (StaR's QP-scalability stress test), softnic sweep loss
          (goodput vs loss rate, every scheme), softnic sweep star (StaR
          Fig. 5a), softnic sweep plot-loss|plot-qps (plots from CSVs),
          softnic sweep schemes
  rules   check a switch's event-injection rule file and print it in
          canonical form: softnic rules FILE
  version the version, commit and Go toolchain of this build (also --version)`)
}

// versionCmd prints the build information: `softnic version`, `softnic
// --version`.
func versionCmd(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return usagef("version: unexpected argument %q", args[0])
	}
	fmt.Fprintln(stdout, "softnic", buildinfo.Read())
	return nil
}

func demo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	size := fs.Int("s", 65536, "message size in bytes")
	iters := fs.Int("n", 5000, "iterations (messages) per run")
	depth := fs.Int("t", 128, "tx depth: writes in flight")
	mtu := fs.Int("m", 1024, "path MTU: 256, 512, 1024, 2048 or 4096")
	scheme := fs.String("scheme", recovery.GBN, fmt.Sprintf("loss recovery %v", recovery.Names()))
	loss := fs.Float64("loss", 1, "loss of the lossy run, percent, both directions")
	rate := fs.Float64("rate", perftest.DefaultLink.RateBps/1e9, "link rate, Gb/s")
	delay := fs.Duration("delay", perftest.DefaultLink.Delay, "one-way propagation delay")
	seed := fs.Uint64("seed", 1, "seed of the fabric's loss")
	gbits := fs.Bool("report_gbits", true, "report Gb/s rather than MB/s")
	pcapFile := fs.String("pcap", "", "write the lossy run's frames, as the writer's NIC sends and receives them, to `FILE` (pcap, simulated time)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, err := qp.MTUFromBytes(*mtu)
	if err != nil {
		return err
	}
	link := perftest.DefaultLink
	link.RateBps, link.Delay = *rate*1e9, *delay
	fmt.Printf(" RDMA_Write BW test on the embedded in-memory fabric (no privileges needed)\n")
	fmt.Printf(" link %.0f Gb/s, one-way delay %v, TX ring %d frames, MTU %d, tx depth %d, recovery %s\n",
		*rate, *delay, link.Ring, *mtu, *depth, *scheme)
	fmt.Printf(" bandwidth is in simulated time: the fabric models rate, delay and loss exactly\n")
	perftest.PrintBWHeader(os.Stdout, *gbits)
	var base float64
	for _, pct := range []float64{0, *loss} {
		link.Loss = pct / 100
		o := perftest.Options{Size: *size, Iters: *iters, TxDepth: *depth, MTU: m, Scheme: *scheme, Seed: *seed}
		var f *os.File
		if pct != 0 && *pcapFile != "" {
			if f, err = os.Create(*pcapFile); err != nil {
				return err
			}
			o.Pcap = f
		}
		r, err := perftest.WriteBWEmbedded(o, link)
		if f != nil {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return err
		}
		perftest.PrintBWRow(os.Stdout, r, *gbits)
		if pct == 0 {
			base = r.AvgGbps
		}
		fmt.Printf("   loss %g%%: %.1f%% of lossless; retransmitted %d of %d packets, %d NAKs, %d ACK timeouts (CPU %v)\n",
			pct, 100*r.AvgGbps/base, r.A.Retransmits, r.A.SentPkts, r.A.RcvdSeqErr, r.A.LocalAckTimeout, r.Wall.Round(1e6))
		if f != nil {
			fmt.Printf("   %d frames of the writer's NIC written to %s\n", r.PcapFrames, *pcapFile)
		}
	}
	fmt.Println("---------------------------------------------------------------------------------------")
	return nil
}
