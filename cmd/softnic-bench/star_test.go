package main

import (
	"strings"
	"testing"
)

// TestStarFlag: --star runs write_bw, read_bw, read_lat, send_bw and
// send_lat with StaR QPs
// and says so in the banner; the tests a stateless server cannot serve,
// a role on the wrong side and a bad role are usage errors.
func TestStarFlag(t *testing.T) {
	for _, args := range [][]string{
		{"write_bw", "--embedded", "--star", "client", "-n", "200", "-q", "4", "-t", "1", "-s", "8"},
		{"read_bw", "--embedded", "--star", "server", "-n", "200"},
		{"send_bw", "--embedded", "--star", "client", "-n", "200", "-q", "2", "-t", "4", "-s", "1400"},
		{"send_lat", "--embedded", "--star", "client", "-n", "100", "-s", "2800"},
		{"read_lat", "--embedded", "--star", "client", "-n", "100", "--scheme", "fasr"},
	} {
		code, out, errs := bench(t, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errs)
		}
		if !strings.Contains(out, " StaR role       : client, the peer server (StaR client: 1-region memory table from the server)") {
			t.Errorf("%q: no StaR role in the banner:\n%s", args, out)
		}
		if args[len(args)-1] == "fasr" && !strings.Contains(out, "Recovery scheme : fasr") {
			t.Errorf("%q: not on fasr:\n%s", args, out)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"write_bw", "--star", "both"}, `--star "both": server or client`},
		{[]string{"write_bw", "--star", "client"}, "--star client on the server side"},
		{[]string{"write_bw", "--star", "server", "host"}, "--star server on the client side"},
		{[]string{"write_lat", "--star", "server"}, "write_lat needs the server to WRITE back"},
		{[]string{"write_lat", "--star", "client", "host"}, "send_lat and rpc_lat run"},
		{[]string{"send_bw", "-b", "--embedded", "--star", "client"}, "-b (bidirectional) does not run on StaR QPs"},
		{[]string{"atomic_bw", "--embedded", "--star", "client"}, "atomics are refused"},
		{[]string{"write_bw", "-b", "--embedded", "--star", "client"}, "-b"},
		{[]string{"raw", "--iface", "lo", "--star", "client"}, "does not apply to raw"},
	} {
		code, out, errs := bench(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%q: exit %d, stderr %q (want exit 2 and %q)", tc.args, code, errs, tc.want)
		}
	}
}
