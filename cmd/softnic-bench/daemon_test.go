//go:build linux

package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/softnic/softnic/bpf"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/afxdp"
	"github.com/softnic/softnic/tests/netns"
	"github.com/softnic/softnic/verbs/verbsd"
)

// startDaemon runs a softnic NIC on host's interface of the testbed, the
// way `softnic run` does: the XDP steering program, an AF_XDP port, an
// engine in its adaptive poll loop and the verbs server on a control
// socket, which it returns. (It runs in the test process because the
// daemon binary does not serve verbs yet; the client side, which is what
// is under test, cannot tell.)
func startDaemon(t *testing.T, tb *netns.Testbed, host string, self netns.Host, dir string) string {
	t.Helper()
	steer, err := bpf.Load(bpf.Options{LocalIPv4: self.IPv4, LocalIPv6: self.IPv6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { steer.Close() })
	var port *afxdp.Port
	var mac [6]byte
	err = tb.Do(host, func() error {
		ifi, err := net.InterfaceByName(self.Iface)
		if err != nil {
			return err
		}
		mac = [6]byte(ifi.HardwareAddr)
		link, err := bpf.Attach(steer.Program, ifi.Index)
		if err != nil {
			return err
		}
		t.Cleanup(func() { link.Close() })
		port, err = afxdp.Open(afxdp.Config{Interface: self.Iface, FrameSize: 2048, XSKMap: steer.XSKMap})
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", host, err)
	}
	t.Cleanup(func() { port.Close() })
	e, err := dataplane.NewEngine(dataplane.Config{MAC: mac, Addr: self.IPv4}, port)
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, host+".sock")
	srv, err := verbsd.New(e, verbsd.Options{SocketPath: socket, Wake: port.Wake, Name: "softnic_" + host})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { srv.Serve(ctx) })
	wg.Go(func() {
		clock := dataplane.NewMonotonicClock()
		e.Run(ctx, port, clock.Now, dataplane.RunConfig{Pump: srv.Pump, BeforeWait: srv.BeforeWait})
	})
	t.Cleanup(func() {
		cancel()
		srv.Close()
		wg.Wait()
	})
	return socket
}

// TestDaemonMode runs softnic-bench the perftest way between two softnic
// daemons of the testbed: the server in B's namespace, the client in A's
// naming B, the TCP exchange and the RoCEv2 traffic through the switch.
// Needs root (namespaces, XDP, AF_XDP).
func TestDaemonMode(t *testing.T) {
	netns.RequireAFXDP(t)
	tb := netns.NewTestbed(t)
	dir := t.TempDir()
	sockA := startDaemon(t, tb, netns.HostA, tb.A, dir)
	sockB := startDaemon(t, tb, netns.HostB, tb.B, dir)

	for i, tc := range []struct {
		args    []string
		columns int
	}{
		{[]string{"write_bw", "-n", "300"}, 5},
		{[]string{"read_bw", "-n", "200", "-q", "2"}, 5},
		{[]string{"send_bw", "-n", "300", "-s", "4096"}, 5},
		{[]string{"atomic_bw", "-n", "300"}, 5},
		{[]string{"write_lat", "-n", "300"}, 9},
		{[]string{"read_lat", "-n", "300"}, 9},
		{[]string{"send_lat", "-n", "300"}, 9},
		// Many QPs, one WRITE in flight on each, on a scheme that is not
		// the daemons' default: every QP runs it. (Not a selective scheme:
		// their 100 µs RTO_low is below this loaded testbed's round trip,
		// and spurious timeouts exhaust the retry count.)
		{[]string{"write_bw", "-n", "1000", "-q", "100", "-t", "1", "-s", "8", "--scheme", "igbn"}, 5},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			port := strconv.Itoa(defaultPort + i)
			var srvOut, srvErr bytes.Buffer
			srvCode := -1
			var wg sync.WaitGroup
			wg.Go(func() {
				err := tb.Do(netns.HostB, func() error {
					srvCode = run(context.Background(), append(tc.args, "--socket", sockB, "-p", port), &srvOut, &srvErr)
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			})
			var out, errs bytes.Buffer
			code := -1
			err := tb.Do(netns.HostA, func() error {
				code = run(context.Background(), append(tc.args, "--socket", sockA, "-p", port, tb.B.IPv4.String()), &out, &errs)
				return nil
			})
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("client:\n%s%s", out.String(), errs.String())
			if code != 0 || srvCode != 0 {
				t.Fatalf("exit codes: client %d, server %d\nserver:\n%s%s", code, srvCode, srvOut.String(), srvErr.String())
			}
			for _, o := range []string{out.String(), srvOut.String()} {
				_, rows := tableRows(t, o)
				if len(rows) != 1 || len(rows[0]) != tc.columns {
					t.Fatalf("rows %q", rows)
				}
				positiveNumbers(t, rows[0])
			}
			if !strings.Contains(srvOut.String(), "Waiting for client") || !strings.Contains(out.String(), "this NIC during the run") {
				t.Fatalf("server output:\n%s", srvOut.String())
			}
			scheme := "gbn"
			if i := slices.Index(tc.args, "--scheme"); i >= 0 {
				scheme = tc.args[i+1]
			}
			for _, o := range []string{out.String(), srvOut.String()} {
				if !strings.Contains(o, " Recovery scheme : "+scheme+" (agreed") || strings.Contains(o, "QPs run") {
					t.Fatalf("banner does not show every QP on %s:\n%s", scheme, o)
				}
			}
		})
	}
}
