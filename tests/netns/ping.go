//go:build linux

package netns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"time"
)

// ICMP echo types (RFC 792, RFC 4443 §4).
const (
	icmpv4EchoRequest = 8
	icmpv4EchoReply   = 0
	icmpv6EchoRequest = 128
	icmpv6EchoReply   = 129
)

// Ping sends count ICMP echo requests from host to dst, 1 ms apart, waits
// up to wait after the last one, and returns how many distinct replies came
// back. It is written in Go on a raw socket, so the tests do not depend on
// iputils being installed; loss shows up as a count below count, not as an
// error.
func (t *Testbed) Ping(host string, dst netip.Addr, count int, wait time.Duration) (int, error) {
	var conn net.PacketConn
	network, address := "ip4:icmp", "0.0.0.0"
	if dst.Is6() {
		network, address = "ip6:ipv6-icmp", "::"
	}
	// The socket is created inside the namespace and stays there.
	err := t.Do(host, func() error {
		var err error
		conn, err = net.ListenPacket(network, address)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("ping from %s: %w", host, err)
	}
	defer conn.Close()
	return ping(conn, dst, count, wait)
}

func ping(conn net.PacketConn, dst netip.Addr, count int, wait time.Duration) (int, error) {
	// A raw socket sees every echo reply in the namespace, so replies are
	// matched on a random identifier.
	id := uint16(rand.Uint32())
	reqType, replyType := byte(icmpv4EchoRequest), byte(icmpv4EchoReply)
	if dst.Is6() {
		reqType, replyType = icmpv6EchoRequest, icmpv6EchoReply
	}
	to := &net.IPAddr{IP: dst.AsSlice()}

	got := make(map[uint16]bool, count)
	readErr := make(chan error, 1)
	go func() {
		buf := make([]byte, 1500)
		// Reads until the deadline, which is set once all requests are
		// out (or the socket is closed on a send error).
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					err = nil
				}
				readErr <- err
				return
			}
			// Go strips the IPv4 header for ip4 sockets; ICMPv6 raw
			// sockets never carry the IPv6 header.
			msg := buf[:n]
			if len(msg) < 8 || msg[0] != replyType || binary.BigEndian.Uint16(msg[4:6]) != id {
				continue
			}
			got[binary.BigEndian.Uint16(msg[6:8])] = true
			if len(got) == count {
				readErr <- nil
				return
			}
		}
	}()

	for seq := range count {
		msg := make([]byte, 8, 16)
		msg[0] = reqType
		binary.BigEndian.PutUint16(msg[4:6], id)
		binary.BigEndian.PutUint16(msg[6:8], uint16(seq))
		msg = append(msg, "softnic!"...)
		if dst.Is4() {
			// The kernel computes ICMPv6 checksums for raw sockets,
			// but not ICMPv4 ones.
			binary.BigEndian.PutUint16(msg[2:4], checksum(msg))
		}
		if _, err := conn.WriteTo(msg, to); err != nil {
			conn.Close()
			<-readErr
			return 0, fmt.Errorf("ping %v: %w", dst, err)
		}
		time.Sleep(time.Millisecond)
	}
	// SetReadDeadline may be called concurrently with ReadFrom.
	conn.SetReadDeadline(time.Now().Add(wait))
	if err := <-readErr; err != nil {
		return 0, fmt.Errorf("ping %v: %w", dst, err)
	}
	return len(got), nil
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
