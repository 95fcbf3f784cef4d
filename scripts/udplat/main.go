// Command udplat is the kernel socket path's latency baseline for
// softnic's write_lat: an 8-byte UDP ping-pong between two hosts, through
// the kernel's network stack both ways, reported in perftest's latency
// table with one-way times (round trip / 2, as ib_write_lat reports).
//
//	udplat -listen 198.18.1.1:18600          # server: echoes
//	udplat -n 10000 198.18.1.1:18600         # client
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/softnic/softnic/internal/perftest"
)

func main() {
	listen := flag.String("listen", "", "serve: echo datagrams on this address")
	n := flag.Int("n", 10000, "round trips")
	size := flag.Int("s", 8, "datagram size")
	csvPath := flag.String("csv", "", "append the result to this CSV file (softnic-bench's columns, test \"udp\")")
	flag.Parse()
	if err := run(*listen, *n, *size, flag.Arg(0), *csvPath); err != nil {
		fmt.Fprintln(os.Stderr, "udplat:", err)
		os.Exit(1)
	}
}

func run(listen string, n, size int, server, csvPath string) error {
	buf := make([]byte, 65536)
	if listen != "" {
		conn, err := net.ListenPacket("udp", listen)
		if err != nil {
			return err
		}
		for {
			k, from, err := conn.ReadFrom(buf)
			if err != nil {
				return err
			}
			if _, err := conn.WriteTo(buf[:k], from); err != nil {
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
	conn, err := net.Dial("udp", server)
	if err != nil {
		return err
	}
	defer conn.Close()
	msg := make([]byte, size)
	samples := make([]time.Duration, 0, n)
	for i := 0; i < n+100; i++ { // 100 warm-up round trips
		conn.SetReadDeadline(time.Now().Add(time.Second))
		start := time.Now()
		if _, err := conn.Write(msg); err != nil {
			return err
		}
		if _, err := conn.Read(buf); err != nil {
			return fmt.Errorf("round trip %d: %w", i, err)
		}
		if i >= 100 {
			samples = append(samples, time.Since(start)/2)
		}
	}
	conn.Write(msg[:1])
	l := perftest.Latencies(samples)
	fmt.Println(" kernel UDP ping-pong (one-way = round trip / 2)")
	perftest.PrintLatHeader(os.Stdout)
	row := perftest.Row{Test: "udp", Bytes: size, Iters: n, Lat: &l}
	perftest.PrintRow(os.Stdout, row, false)
	if csvPath != "" {
		return perftest.AppendCSV(csvPath, row)
	}
	return nil
}
