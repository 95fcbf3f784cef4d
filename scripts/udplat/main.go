// Command udplat is the kernel socket path's latency baseline for
// softnic's write_lat: an 8-byte UDP ping-pong between two hosts, through
// the kernel's network stack both ways, reported in perftest's latency
// table with one-way times (round trip / 2, as ib_write_lat reports).
//
//	udplat -listen 198.18.1.1:18600          # server: echoes
//	udplat -n 10000 198.18.1.1:18600         # client
//
// Both ends are what a C program's ping-pong would be: one thread,
// send(2) and recv(2) and nothing else (no Go netpoller between the socket
// and the loop). By default recv polls (MSG_DONTWAIT, sched_yield between
// tries), as softnic's poll loops and softnic-bench wait: the same waiting
// policy on both paths, and on this two-core VM the faster of the two
// kernel baselines (a cross-CPU wake-up from a blocking recv costs more
// than the path itself); -busy=false blocks.
package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/internal/perftest"
)

func main() {
	listen := flag.String("listen", "", "serve: echo datagrams on this address")
	n := flag.Int("n", 10000, "round trips")
	size := flag.Int("s", 8, "datagram size")
	csvPath := flag.String("csv", "", "append the result to this CSV file (softnic-bench's columns, test \"udp\", or \"udp_blocking\" with -busy=false)")
	busy := flag.Bool("busy", true, "poll the socket (non-blocking recv, sched_yield between tries), as softnic's poll loops and softnic-bench wait, rather than block in recv")
	flag.Parse()
	runtime.GOMAXPROCS(1)
	runtime.LockOSThread()
	recvWait = *busy
	if err := run(*listen, *n, *size, flag.Arg(0), *csvPath); err != nil {
		fmt.Fprintln(os.Stderr, "udplat:", err)
		os.Exit(1)
	}
}

// socket opens a blocking UDP socket for addr's family, bound to bind
// if it is valid, with a one-second receive timeout.
func socket(addr netip.AddrPort, bind bool) (int, error) {
	family := unix.AF_INET
	if addr.Addr().Is6() && !addr.Addr().Is4In6() {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	tv := unix.NsecToTimeval(int64(time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, err
	}
	sa := sockaddr(addr)
	if bind {
		err = unix.Bind(fd, sa)
	} else {
		err = unix.Connect(fd, sa)
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("%v: %w", addr, err)
	}
	return fd, nil
}

// recvWait: poll instead of blocking (-busy).
var recvWait bool

// recv is recvfrom(2), blocking or polled (-busy) until a datagram or a
// second passes.
func recv(fd int, buf []byte) (int, unix.Sockaddr, error) {
	if !recvWait {
		return unix.Recvfrom(fd, buf, 0)
	}
	deadline := time.Now().Add(time.Second)
	for i := 0; ; i++ {
		k, from, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
		if err != unix.EAGAIN {
			return k, from, err
		}
		if i%1024 == 1023 && time.Now().After(deadline) {
			return 0, nil, unix.EAGAIN
		}
		_, _, _ = unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
}

func sockaddr(a netip.AddrPort) unix.Sockaddr {
	if a.Addr().Is4() || a.Addr().Is4In6() {
		return &unix.SockaddrInet4{Port: int(a.Port()), Addr: a.Addr().Unmap().As4()}
	}
	return &unix.SockaddrInet6{Port: int(a.Port()), Addr: a.Addr().As16()}
}

func run(listen string, n, size int, server, csvPath string) error {
	buf := make([]byte, 65536)
	if listen != "" {
		addr, err := netip.ParseAddrPort(listen)
		if err != nil {
			return err
		}
		fd, err := socket(addr, true)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for {
			k, from, err := recv(fd, buf)
			if err == unix.EAGAIN || err == unix.EINTR {
				continue // the receive timeout: keep serving
			}
			if err != nil {
				return err
			}
			if err := unix.Sendto(fd, buf[:k], 0, from); err != nil {
				return err
			}
			if k == 1 { // the client's goodbye
				return nil
			}
		}
	}
	if server == "" || size < 2 {
		return fmt.Errorf("usage: udplat [-n N] [-s SIZE>=2] SERVER:PORT | udplat -listen ADDR:PORT")
	}
	addr, err := netip.ParseAddrPort(server)
	if err != nil {
		return err
	}
	fd, err := socket(addr, false)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	msg := make([]byte, size)
	samples := make([]time.Duration, 0, n)
	for i := 0; i < n+100; i++ { // 100 warm-up round trips
		start := time.Now()
		if _, err := unix.Write(fd, msg); err != nil {
			return err
		}
		if _, _, err := recv(fd, buf); err != nil {
			return fmt.Errorf("round trip %d: %w", i, err)
		}
		if i >= 100 {
			samples = append(samples, time.Since(start)/2)
		}
	}
	unix.Write(fd, msg[:1])
	l := perftest.Latencies(samples)
	how := "blocking recv"
	if recvWait {
		how = "recv polled with sched_yield, as softnic waits"
	}
	fmt.Printf(" kernel UDP ping-pong (one-way = round trip / 2; one thread, %s)\n", how)
	perftest.PrintLatHeader(os.Stdout)
	test := "udp"
	if !recvWait {
		test = "udp_blocking"
	}
	row := perftest.Row{Test: test, Bytes: size, Iters: n, Lat: &l}
	perftest.PrintRow(os.Stdout, row, false)
	if csvPath != "" {
		return perftest.AppendCSV(csvPath, row)
	}
	return nil
}
