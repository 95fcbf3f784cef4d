package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/internal/capture"
	"github.com/softnic/softnic/internal/pcap"
	"github.com/softnic/softnic/verbs"
)

// captureCmd is `softnic capture`: tcpdump for a running daemon's NIC.
// The frames come from the engine's receive and transmit paths (XDP
// redirects them to AF_XDP before the kernel's taps, so tcpdump on the
// interface sees none) over the control socket (docs/capture.md).
func captureCmd(args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("capture", flag.ContinueOnError)
	flags.SetOutput(stderr)
	socket := flags.String("i", defaultSocket, "control socket of the daemon (softnic run --socket)")
	flags.StringVar(socket, "socket", defaultSocket, "same as -i")
	out := flags.String("w", "", "write a pcap file (- for standard output) instead of one line per packet")
	count := flags.Int("c", 0, "stop after this many packets (0: until interrupted)")
	snap := flags.Int("s", 0, "bytes kept of each frame (0: whole frames)")
	qpn := flags.Int64("qpn", -1, "keep only frames whose BTH DestQP is this QPN")
	opcode := flags.String("opcode", "", "keep only frames with this BTH opcode: a number (0xd1) or a name (RC_ACKNOWLEDGE_SACK)")
	slots := flags.Int("B", 0, "frames the daemon buffers for this capture (0: its default, 4096)")
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return usagef("capture: unexpected argument %q", flags.Arg(0))
	}
	if *count < 0 || *snap < 0 || *qpn < -1 || *qpn > 0xFFFFFF {
		return usagef("capture: -c and -s take a count >= 0, --qpn a QPN below 2^24")
	}
	op := -1
	if *opcode != "" {
		var err error
		if op, err = capture.ParseOpcode(*opcode); err != nil {
			return usageError{err}
		}
	}
	ctx, err := verbs.Dial(*socket)
	if err != nil {
		return err
	}
	defer ctx.Close()
	cp, err := ctx.Capture(verbs.CaptureOptions{SnapLen: *snap, QPN: *qpn, Opcode: op, Slots: *slots})
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	var write func(verbs.CaptureRecord) error
	var flush func() error
	switch *out {
	case "":
		bw := bufio.NewWriter(stdout)
		write = func(r verbs.CaptureRecord) error {
			if _, err := fmt.Fprintln(bw, summary(r)); err != nil {
				return err
			}
			return bw.Flush()
		}
		flush = bw.Flush
	default:
		var w io.Writer = stdout
		var file *os.File
		if *out != "-" {
			if file, err = os.Create(*out); err != nil {
				cp.Stop()
				return err
			}
			defer file.Close()
			w = file
		}
		bw := bufio.NewWriterSize(w, 1<<16)
		pw, err := pcap.NewWriter(bw, cp.SnapLen)
		if err != nil {
			cp.Stop()
			return err
		}
		write = func(r verbs.CaptureRecord) error {
			return pw.WritePacket(time.Duration(r.Time.UnixNano()), r.OrigLen, r.Data)
		}
		flush = func() error {
			if err := bw.Flush(); err != nil {
				return err
			}
			if file != nil {
				return file.Close()
			}
			return nil
		}
	}
	sig, stopSig := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSig()
	go func() {
		<-sig.Done()
		cp.Stop() // the stream ends: Next returns io.EOF
	}()
	if *out != "-" {
		fmt.Fprintf(stderr, "softnic capture: listening on %s, snapshot length %d bytes\n", ctx.Name(), cp.SnapLen)
	}
	var n int
	var werr error
	for *count == 0 || n < *count {
		r, err := cp.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				werr = err
			}
			break
		}
		if werr = write(r); werr != nil {
			break
		}
		n++
	}
	matched, dropped, serr := cp.Stop()
	if err := flush(); werr == nil {
		werr = err
	}
	if serr != nil {
		fmt.Fprintf(stderr, "%d packets captured, dropped unknown (%v)\n", n, serr)
	} else {
		// As tcpdump: dropped are the frames that matched but found the
		// daemon's buffer full (the reader was too slow).
		fmt.Fprintf(stderr, "%d packets captured, %d dropped (%d received by filter)\n", n, dropped, matched)
	}
	return werr
}

// summary is one line per packet, tcpdump's style: time, direction,
// opcode, destination QP, PSN, length.
func summary(r verbs.CaptureRecord) string {
	ts := r.Time.Format("15:04:05.000000")
	f, err := bth.ParseFrame(r.Data)
	if err != nil {
		return fmt.Sprintf("%s %s length %d: not a RoCEv2 frame softnic parses (%v)", ts, r.Dir, r.OrigLen, err)
	}
	b := f.Pkt.BTH()
	return fmt.Sprintf("%s %s %s > %s %v QP %#x PSN %d length %d", ts, r.Dir, f.SrcAddr(), f.DstAddr(), f.Pkt.Opcode(), b.DestQPN(), b.PSN(), r.OrigLen)
}
