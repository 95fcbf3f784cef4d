//go:build linux

package tests

import (
	"encoding/binary"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane/netsw"
	"github.com/softnic/softnic/tests/netns"
)

// TestDaemonHonoursPFC: a daemon on host A (--pfc, the default, for
// priority 3) receives PFC frames from its link partner, the switch's
// port sw-a, sent there with an AF_PACKET raw socket: the XDP program
// steers them to the NIC (xdp_pause_steered), a pause for priority 3
// counts in rx_prio_pause, its resume in rx_prio_pause_resume, a pause
// for priority 1 and an 802.3x PAUSE in rx_pause_ignored, and none is a
// malformed RoCE frame.
func TestDaemonHonoursPFC(t *testing.T) {
	tb := requireDaemon(t)
	socket := filepath.Join(t.TempDir(), "softnic.sock")
	d := startDaemon(t, tb, netns.HostA, "--iface", tb.A.Iface, "--socket", socket, "--metrics", "", "--pfc-priority", "3")
	d.waitReady(socket)

	var src [6]byte
	frame := func(priority int, quanta uint16) []byte {
		f := netsw.PausePriority(src, priority, quanta)
		b := make([]byte, netsw.PFCFrameLen)
		f.Encode(b)
		return b
	}
	err := tb.Do(netns.HostSwitch, func() error {
		ifi, err := net.InterfaceByName(tb.SwitchA.Iface)
		if err != nil {
			return err
		}
		copy(src[:], ifi.HardwareAddr)
		proto := int(htons(netsw.EtherTypeMACControl))
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		defer unix.Close(fd)
		to := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Protocol: htons(netsw.EtherTypeMACControl)}
		pause := frame(3, 1000) // 51 µs at 10 Gb/s
		resume := frame(3, 0)
		other := frame(1, 0xffff)
		pause8023x := frame(3, 0xffff)
		binary.BigEndian.PutUint16(pause8023x[14:], netsw.OpcodePause)
		for _, f := range [][]byte{pause, resume, other, pause8023x} {
			if err := unix.Sendto(fd, f, 0, to); err != nil {
				return fmt.Errorf("send on %s: %w", ifi.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := stats(t, socket)
		if err != nil {
			t.Fatal(err, out)
		}
		got := func(name string) uint64 { return statValue(t, out, name) }
		if got("xdp_pause_steered") == 4 && got("rx_prio_pause") == 1 && got("rx_prio_pause_resume") == 1 && got("rx_pause_ignored") == 2 {
			if got("rcvd_malformed") != 0 {
				t.Errorf("rcvd_malformed %d: pause frames taken for RoCE", got("rcvd_malformed"))
			}
			// The resume may come in the same poll as the pause: 0 is
			// fine, more than the pause's 51.2 µs is not.
			if ns := got("rx_prio_pause_duration_ns"); ns > 51200 {
				t.Errorf("rx_prio_pause_duration_ns %d, want at most 51200: the pause, ended by the resume or its time", ns)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pause frames did not reach the engine as four, a pause, a resume and two ignored:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// htons is the network byte order of a 16-bit protocol number, as
// AF_PACKET's protocol fields want it.
func htons(v uint16) uint16 { return v<<8 | v>>8 }
