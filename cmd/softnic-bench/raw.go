package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/softnic/softnic/bpf"
	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane/afxdp"
	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/verbs/cm"
)

const (
	// rawDestQPN is the QPN raw frames carry: one no softnic QP gets
	// (QPNs are handed out upwards from 0x10), so a softnic daemon that
	// sees them drops them as unknown.
	rawDestQPN = 0xFFFFF0
	// rawDefaultPayload makes each frame a full RoCE packet at path MTU
	// 1024, the size of softnic's own data packets on veth.
	rawDefaultPayload = 1024
	rawDefaultSeconds = 5
)

// runRaw is the raw test: the server steers RoCEv2 frames into an AF_XDP
// socket with softnic's XDP program and counts them; the client builds
// frames as fast as it can into its own AF_XDP socket. Both need root.
func runRaw(ctx context.Context, o *options, out io.Writer) error {
	ifi, err := net.InterfaceByName(o.iface)
	if err != nil {
		return fmt.Errorf("raw: %w", err)
	}
	payload := rawDefaultPayload
	if o.set["size"] {
		payload = o.size
	}
	// A received frame must fit a UMEM chunk after the 256-byte headroom.
	frameSize := 2048
	if 62+bth.BTHLen+payload+3+bth.ICRCLen > 2048-256 {
		frameSize = 4096
	}
	cfg := afxdp.Config{Interface: o.iface, FrameSize: frameSize}
	if o.server == "" {
		// Only the receiver needs the steering program; a sender's frames
		// leave through its socket's TX ring without one.
		var opts bpf.Options
		if o.srcIP != "" {
			a, _ := netip.ParseAddr(o.srcIP)
			if a = a.Unmap(); a.Is4() {
				opts.LocalIPv4 = a
			} else {
				opts.LocalIPv6 = a
			}
		}
		steer, err := bpf.Load(opts)
		if err != nil {
			return fmt.Errorf("raw: load the XDP program (needs root): %w", err)
		}
		defer steer.Close()
		link, err := bpf.Attach(steer.Program, ifi.Index)
		if err != nil {
			return fmt.Errorf("raw: %w", err)
		}
		defer link.Close()
		cfg.XSKMap = steer.XSKMap
	}
	port, err := afxdp.Open(cfg)
	if err != nil {
		return fmt.Errorf("raw: open the AF_XDP port (needs root): %w", err)
	}
	defer port.Close()
	rp := perftest.RawPort{Port: port, Wait: port.Wait}
	mode := "copy mode"
	if port.ZeroCopy() {
		mode = "zero-copy"
	}

	perftest.PrintRule(out)
	fmt.Fprintf(out, "                    Raw RoCEv2 frames, no transport\n")
	fmt.Fprintf(out, " Interface       : %s, AF_XDP %s, queues %v\n", o.iface, mode, port.Queues())
	var res perftest.RawResult
	if o.server == "" {
		fmt.Fprintln(out, "\n************************************\n* Waiting for client to connect... *\n************************************")
		conn, err := cm.Server(ctx, ":"+strconv.Itoa(o.port))
		if err != nil {
			return err
		}
		defer conn.Close()
		perftest.PrintRule(out)
		res, err = perftest.RawServer(ctx, rp, conn, func(s perftest.RawStats) {
			fmt.Fprintf(out, " received %10.0f frames/s  %7.3f Mpps  %7.2f Gb/s\n", float64(s.Frames)/s.Elapsed.Seconds(), s.Mpps(), s.Gbps())
		})
		if err != nil {
			return err
		}
	} else {
		mac, _ := net.ParseMAC(o.dstMAC)
		src, _ := netip.ParseAddr(o.srcIP)
		dst, _ := netip.ParseAddr(o.dstIP)
		f := perftest.RawFrame{
			Header:  bth.FrameHeader{SrcMAC: [6]byte(ifi.HardwareAddr), DstMAC: [6]byte(mac), Src: src, Dst: dst},
			DestQPN: rawDestQPN,
			Payload: payload,
		}
		if len(ifi.HardwareAddr) != 6 || len(mac) != 6 {
			return fmt.Errorf("raw: Ethernet MAC addresses needed (interface %v, --dst-mac %v)", ifi.HardwareAddr, mac)
		}
		d := time.Duration(rawDefaultSeconds) * time.Second
		if o.duration > 0 {
			d = time.Duration(o.duration * float64(time.Second))
		}
		fmt.Fprintf(out, " Frames          : %d bytes (RoCE payload %d), %v -> %v, for %v\n",
			f.Header.Len()+bth.BTHLen+payload+bth.PadFor(payload)+bth.ICRCLen, payload, src, dst, d)
		conn, err := cm.Client(ctx, net.JoinHostPort(o.server, strconv.Itoa(o.port)), connectRetry)
		if err != nil {
			return err
		}
		defer conn.Close()
		perftest.PrintRule(out)
		if res, err = perftest.RawClient(ctx, rp, conn, f, d); err != nil {
			return err
		}
	}
	perftest.PrintRule(out)
	fmt.Fprintf(out, " %-9s %12s %9s %14s %9s %9s\n", "", "frames", "seconds", "frames/s", "Mpps", "Gb/s")
	for _, l := range []struct {
		name string
		s    perftest.RawStats
	}{{"sent", res.Sent}, {"received", res.Received}} {
		fmt.Fprintf(out, " %-9s %12d %9.3f %14.0f %9.3f %9.2f\n", l.name, l.s.Frames, l.s.Elapsed.Seconds(),
			float64(l.s.Frames)/max(l.s.Elapsed.Seconds(), 1e-9), l.s.Mpps(), l.s.Gbps())
	}
	if res.Sent.Frames > 0 {
		lost := float64(res.Sent.Frames) - float64(res.Received.Frames)
		fmt.Fprintf(out, " lost      %.3f%% of the frames sent\n", 100*max(lost, 0)/float64(res.Sent.Frames))
	}
	// The socket was opened for this run: its kernel counters are the run's.
	st := port.Stats()
	fmt.Fprintf(out, " receive drops: rx_ring_full %d, rx_fill_ring_empty_descs %d, rx_dropped %d\n",
		st.RxRingFull, st.RxFillRingEmpty, st.RxDropped)
	perftest.PrintRule(out)
	return nil
}
