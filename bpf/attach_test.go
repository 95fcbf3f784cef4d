//go:build linux

package bpf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/tests/netns"
)

// These tests attach the program to host B's veth (b-sw) in a testbed and
// send real traffic from host A through the switch.

// ifindex returns the index of name in host's namespace.
func ifindex(t *testing.T, tb *netns.Testbed, host, name string) int {
	t.Helper()
	var idx int
	if err := tb.Do(host, func() error {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return err
		}
		idx = ifi.Index
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return idx
}

// attachments lists the XDP programs on ifindex in host's namespace.
func attachments(t *testing.T, tb *netns.Testbed, host string, ifindex int) []xdpAttachment {
	t.Helper()
	var list []xdpAttachment
	if err := tb.Do(host, func() (err error) {
		list, err = xdpAttachments(ifindex)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return list
}

// listenUDP opens a kernel UDP socket on host's addr:port.
func listenUDP(t *testing.T, tb *netns.Testbed, host string, addr netip.Addr, port uint16) *net.UDPConn {
	t.Helper()
	var conn *net.UDPConn
	if err := tb.Do(host, func() (err error) {
		conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, port)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// sendUDP sends n datagrams from host to dst.
func sendUDP(t *testing.T, tb *netns.Testbed, host string, dst netip.AddrPort, n int, payload string) {
	t.Helper()
	if err := tb.Do(host, func() error {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		for range n {
			if _, err := c.Write([]byte(payload)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// receiveUDP counts datagrams arriving on conn, stopping at want of them
// or after wait, whichever comes first; a loaded machine may take a while,
// so wait is generous where datagrams are expected.
func receiveUDP(conn *net.UDPConn, want int, wait time.Duration) int {
	buf := make([]byte, 2048)
	conn.SetReadDeadline(time.Now().Add(wait))
	n := 0
	for n < want {
		if _, _, err := conn.ReadFromUDP(buf); err != nil {
			break
		}
		n++
	}
	return n
}

// TestAttachPassesWithoutSocket: with the program attached and no AF_XDP
// socket, RoCEv2 datagrams still reach the kernel (bpf_redirect_map's
// XDP_PASS fallback), other traffic is untouched, and the counters say so
// exactly.
func TestAttachPassesWithoutSocket(t *testing.T) {
	s := loadForTest(t, Options{})
	tb := netns.NewTestbed(t)
	idx := ifindex(t, tb, netns.HostB, tb.B.Iface)

	var l *Link
	if err := tb.Do(netns.HostB, func() (err error) {
		l, err = Attach(s.Program, idx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("attached to veth %s in %s mode", tb.B.Iface, l.Mode)
	if got := attachments(t, tb, netns.HostB, idx); len(got) != 1 {
		t.Fatalf("netlink shows %d XDP programs on %s, want 1", len(got), tb.B.Iface)
	}

	roce4 := listenUDP(t, tb, netns.HostB, tb.B.IPv4, RoCEv2Port)
	roce6 := listenUDP(t, tb, netns.HostB, tb.B.IPv6, RoCEv2Port)
	other := listenUDP(t, tb, netns.HostB, tb.B.IPv4, RoCEv2Port+1)
	const n = 20
	sendUDP(t, tb, netns.HostA, netip.AddrPortFrom(tb.B.IPv4, RoCEv2Port), n, "roce4")
	sendUDP(t, tb, netns.HostA, netip.AddrPortFrom(tb.B.IPv6, RoCEv2Port), n, "roce6")
	sendUDP(t, tb, netns.HostA, netip.AddrPortFrom(tb.B.IPv4, RoCEv2Port+1), n, "other")
	for name, conn := range map[string]*net.UDPConn{"UDP/4791 v4": roce4, "UDP/4791 v6": roce6, "UDP/4792": other} {
		if got := receiveUDP(conn, n, 5*time.Second); got != n {
			t.Errorf("%s: kernel socket got %d of %d datagrams", name, got, n)
		}
	}
	if got, err := tb.Ping(netns.HostA, tb.B.IPv4, 3, time.Second); err != nil || got != 3 {
		t.Errorf("ping through the attached program: %d of 3, %v", got, err)
	}

	c, err := s.Counters()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("counters: %+v", c)
	// veth does not lose frames and nothing else sends UDP in the
	// testbed, so these are exact.
	if c.Steered != 0 || c.NoSocket != 2*n || c.OtherPort != n {
		t.Errorf("counters %+v: want steered 0, no-socket %d, other-port %d", c, 2*n, n)
	}
	if c.NotUDP < 3 { // the pings at least
		t.Errorf("counters %+v: want not-udp >= 3 (ICMP)", c)
	}

	// A second program cannot take the hook, and the error says why.
	if err := tb.Do(netns.HostB, func() error {
		l2, err := Attach(s.Program, idx)
		if err == nil {
			l2.Close()
			return errors.New("second Attach succeeded")
		}
		if !strings.Contains(err.Error(), "DetachStale") {
			return fmt.Errorf("second Attach: %v, want a hint naming DetachStale", err)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := attachments(t, tb, netns.HostB, idx); len(got) != 0 {
		t.Errorf("after Close, netlink shows %v on %s", got, tb.B.Iface)
	}
}

// TestSteerToAFXDP binds a real AF_XDP socket to B's queue 0 and checks
// that RoCEv2 frames arrive in it, and not in the kernel's UDP socket,
// while other UDP still goes to the kernel. It runs in both modes.
func TestSteerToAFXDP(t *testing.T) {
	netns.RequireAFXDP(t)
	netns.RequireRoot(t)
	for _, mode := range []Mode{ModeDriver, ModeGeneric} {
		t.Run(mode.String(), func(t *testing.T) {
			netns.RequireAFXDP(t)
			s := loadForTest(t, Options{LocalIPv4: netip.MustParseAddr("198.18.1.1"), LocalIPv6: netip.MustParseAddr("2001:db8:b::1")})
			tb := netns.NewTestbed(t)
			idx := ifindex(t, tb, netns.HostB, tb.B.Iface)

			var l *Link
			var xsk *testXSK
			if err := tb.Do(netns.HostB, func() (err error) {
				if l, err = AttachMode(s.Program, idx, mode); err != nil {
					return err
				}
				xsk, err = openXSK(idx, 0)
				return err
			}); err != nil {
				if l != nil {
					l.Close()
				}
				t.Fatal(err)
			}
			defer l.Close()
			defer xsk.Close()
			if err := s.XSKMap.Put(uint32(0), uint32(xsk.fd)); err != nil {
				t.Fatal(err)
			}

			kernel := listenUDP(t, tb, netns.HostB, tb.B.IPv4, RoCEv2Port)
			other := listenUDP(t, tb, netns.HostB, tb.B.IPv4, RoCEv2Port+1)
			sendUDP(t, tb, netns.HostA, netip.AddrPortFrom(tb.B.IPv4, RoCEv2Port), 1, "roce-over-ipv4")
			sendUDP(t, tb, netns.HostA, netip.AddrPortFrom(tb.B.IPv6, RoCEv2Port), 1, "roce-over-ipv6")
			sendUDP(t, tb, netns.HostA, netip.AddrPortFrom(tb.B.IPv4, RoCEv2Port+1), 1, "kernel")

			for _, want := range []string{"roce-over-ipv4", "roce-over-ipv6"} {
				frame, err := xsk.receive(2 * time.Second)
				if err != nil {
					t.Fatalf("AF_XDP socket, waiting for %q: %v", want, err)
				}
				if !bytes.HasSuffix(frame, []byte(want)) {
					t.Errorf("AF_XDP socket got frame %x, want one ending in %q", frame, want)
				}
			}
			if got := receiveUDP(kernel, 1, 200*time.Millisecond); got != 0 {
				t.Errorf("kernel UDP/4791 socket got %d datagrams, want 0 (steered away)", got)
			}
			if got := receiveUDP(other, 1, 5*time.Second); got != 1 {
				t.Errorf("kernel UDP/4792 socket got %d datagrams, want 1", got)
			}
			c, err := s.Counters()
			if err != nil {
				t.Fatal(err)
			}
			if c.Steered != 2 || c.NoSocket != 0 || c.OtherPort != 1 {
				t.Errorf("counters %+v: want steered 2, no-socket 0, other-port 1", c)
			}
		})
	}
}

// loadForeign loads a trivial XDP program under another name.
func loadForeign(t *testing.T) *ebpf.Program {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "foreign_xdp",
		Type:         ebpf.XDP,
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, xdpPass), asm.Return()},
		License:      "MIT",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog
}

func TestDetachStale(t *testing.T) {
	s := loadForTest(t, Options{})
	tb := netns.NewTestbed(t)
	idx := ifindex(t, tb, netns.HostB, tb.B.Iface)
	inB := func(fn func() error) {
		t.Helper()
		if err := tb.Do(netns.HostB, fn); err != nil {
			t.Fatal(err)
		}
	}
	detach := func(want int) {
		t.Helper()
		var n int
		inB(func() (err error) { n, err = DetachStale(idx); return err })
		if n != want {
			t.Errorf("DetachStale removed %d, want %d", n, want)
		}
		if got := attachments(t, tb, netns.HostB, idx); len(got) != 0 {
			t.Errorf("after DetachStale, netlink shows %v", got)
		}
	}

	t.Run("nothing attached", func(t *testing.T) { detach(0) })

	// As `ip link set dev b-sw xdpgeneric/xdpdrv obj ...` would leave it.
	for _, mode := range []uint32{unix.XDP_FLAGS_SKB_MODE, unix.XDP_FLAGS_DRV_MODE} {
		t.Run(fmt.Sprintf("netlink attachment flags %#x", mode), func(t *testing.T) {
			inB(func() error { return setXDP(idx, s.Program.FD(), mode) })
			if got := attachments(t, tb, netns.HostB, idx); len(got) != 1 || got[0].mode != mode {
				t.Fatalf("netlink attach: attachments %v", got)
			}
			detach(1)
		})
	}

	// A bpf_link that outlives its purpose (pinned, or its fd inherited
	// by a stuck process): netlink cannot remove it (EBUSY), so
	// DetachStale detaches the link itself.
	t.Run("bpf_link attachment", func(t *testing.T) {
		var l *Link
		inB(func() (err error) { l, err = Attach(s.Program, idx); return err })
		defer l.Close()
		detach(1)
	})

	t.Run("foreign program is left alone", func(t *testing.T) {
		foreign := loadForeign(t)
		inB(func() error { return setXDP(idx, foreign.FD(), unix.XDP_FLAGS_SKB_MODE) })
		defer inB(func() error { return setXDP(idx, -1, unix.XDP_FLAGS_SKB_MODE) })
		var err error
		_ = tb.Do(netns.HostB, func() error { _, err = DetachStale(idx); return nil })
		if !errors.Is(err, ErrForeignProgram) || !strings.Contains(err.Error(), "foreign_xdp") {
			t.Errorf("DetachStale with a foreign program: %v, want ErrForeignProgram naming it", err)
		}
		if got := attachments(t, tb, netns.HostB, idx); len(got) != 1 {
			t.Errorf("foreign program removed: attachments %v", got)
		}
	})
}

const helperEnv = "SOFTNIC_BPF_ATTACH_HELPER"

// TestKilledProcessDetaches starts a child process that attaches the
// program to B's veth and then SIGKILLs it: the bpf_link dies with the
// process and the interface is clean without DetachStale.
func TestKilledProcessDetaches(t *testing.T) {
	netns.RequireBPF(t)
	tb := netns.NewTestbed(t)
	idx := ifindex(t, tb, netns.HostB, tb.B.Iface)

	cmd := exec.Command(os.Args[0], "-test.run=^TestAttachHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+tb.B.NS+":"+strconv.Itoa(idx))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "attached") {
		t.Fatalf("helper: %q, %v", line, err)
	}
	if got := attachments(t, tb, netns.HostB, idx); len(got) != 1 {
		t.Fatalf("while the helper runs: attachments %v, want 1", got)
	}

	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	// The link is released with the process's last fd; on some kernels
	// the final put is deferred to a workqueue, hence the short poll.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := attachments(t, tb, netns.HostB, idx)
		if len(got) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after SIGKILL the program is still attached: %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAttachHelperProcess is the child of TestKilledProcessDetaches; run
// directly it does nothing.
func TestAttachHelperProcess(t *testing.T) {
	arg := os.Getenv(helperEnv)
	if arg == "" {
		t.Skip("helper process for TestKilledProcessDetaches")
	}
	ns, idxText, _ := strings.Cut(arg, ":")
	idx, _ := strconv.Atoi(idxText)
	s, err := Load(Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := netns.Do(ns, func() error {
		_, err := Attach(s.Program, idx)
		return err
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("attached")
	time.Sleep(time.Minute) // until killed
	os.Exit(1)
}
