//go:build linux

package main

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/softnic/softnic/tests/netns"
)

// TestRawTestbed runs the raw test between the testbed's hosts, through
// the switch: the server in B's namespace steers RoCEv2 frames into its
// AF_XDP socket and counts them, the client in A's builds them into its
// own. Needs root (namespaces, XDP, AF_XDP).
func TestRawTestbed(t *testing.T) {
	netns.RequireAFXDP(t)
	tb := netns.NewTestbed(t)
	var swMAC net.HardwareAddr
	if err := tb.Do(netns.HostSwitch, func() error {
		ifi, err := net.InterfaceByName(tb.SwitchA.Iface)
		swMAC = ifi.HardwareAddr
		return err
	}); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(defaultPort)
	var srvOut, srvErr bytes.Buffer
	srvCode := -1
	var wg sync.WaitGroup
	wg.Go(func() {
		err := tb.Do(netns.HostB, func() error {
			srvCode = run(context.Background(), []string{"raw", "--iface", tb.B.Iface, "--src-ip", tb.B.IPv4.String(), "-p", port}, &srvOut, &srvErr)
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
	var out, errs bytes.Buffer
	code := -1
	err := tb.Do(netns.HostA, func() error {
		// The routed path's next hop is the switch, so that is the
		// frames' destination MAC.
		code = run(context.Background(), []string{"raw", "--iface", tb.A.Iface, "--dst-mac", swMAC.String(),
			"--src-ip", tb.A.IPv4.String(), "--dst-ip", tb.B.IPv4.String(), "-D", "1", "-p", port, tb.B.IPv4.String()}, &out, &errs)
		return nil
	})
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("client:\n%s%s\nserver:\n%s%s", out.String(), errs.String(), srvOut.String(), srvErr.String())
	if code != 0 || srvCode != 0 {
		t.Fatalf("exit codes: client %d, server %d", code, srvCode)
	}
	for _, o := range []string{out.String(), srvOut.String()} {
		sent, received := rawCount(t, o, "sent"), rawCount(t, o, "received")
		if sent == 0 || received == 0 || received > sent {
			t.Fatalf("sent %d, received %d", sent, received)
		}
	}
}

// rawCount reads the frame count of a "sent" or "received" summary line.
func rawCount(t *testing.T, out, side string) uint64 {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 6 && f[0] == side {
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %q line in:\n%s", side, out)
	return 0
}
