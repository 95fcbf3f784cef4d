package perftest

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/recovery"
	"github.com/softnic/softnic/verbs"
)

// TestStarRuns: write_bw, read_bw, read_lat, send_bw and send_lat with
// --star on the embedded fabric, lossless and at 1% loss: every QP of the
// server is a stateless StaR server and of the client a StaR client (as
// the engines show), on a scheme that places out of order, and the
// server's NIC served RDPs or GDs with no context on chip; in the SEND
// tests the server's RECVs and SENDs went out as WQEPs and came back as
// CQEPs.
func TestStarRuns(t *testing.T) {
	for _, tc := range []struct {
		test Test
		loss float64
	}{{WriteBW, 0}, {ReadBW, 0}, {ReadLat, 0}, {SendBW, 0}, {SendLat, 0}, {WriteBW, 0.01}, {ReadBW, 0.01}, {SendBW, 0.01}, {SendLat, 0.01}} {
		t.Run(tc.test.String(), func(t *testing.T) {
			cfg := Config{Test: tc.test, Sizes: []int{4096}, Iters: 200, QPs: 4, TxDepth: 4, Star: true}
			if tc.test.IsLatency() {
				cfg.QPs, cfg.TxDepth, cfg.Iters = 1, 1, 100
			}
			var client, server dataplane.Counters
			var roles []string
			hooks := Hooks{
				Connected: func(c Connection) {
					for _, ep := range c.Local {
						roles = append(roles, ep.Star.String())
					}
					for _, ep := range c.Remote {
						roles = append(roles, ep.Star.String())
					}
					if !strings.Contains(strings.Join(StarSchemes(), " "), c.QPScheme) {
						t.Errorf("QPs run %s, not a StaR scheme", c.QPScheme)
					}
				},
				Counters: func(c, s dataplane.Counters) { client, server = c, s },
			}
			// The embedded run keeps wall-clock time; IRN's 100/320 µs
			// timeouts fire spuriously on a loaded or race-instrumented
			// engine (a StaR server's WQEPs and CQEPs come between a
			// client's packets and their answers) until retries run out,
			// so the clients wait 10/20 ms.
			params := recovery.Params{RTOLow: 10 * time.Millisecond, RTOHigh: 20 * time.Millisecond}
			rows, err := RunEmbedded(context.Background(), cfg, Fabric{Link: Link{RateBps: 10e9, Delay: 2 * time.Microsecond, Loss: tc.loss}, Seed: 5, SchemeParams: params}, hooks)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 || rows[0].Iters != cfg.Iters {
				t.Fatalf("rows %+v", rows)
			}
			want := strings.Repeat("client ", cfg.QPs) + strings.Repeat("server ", cfg.QPs)
			if strings.Join(roles, " ")+" " != want {
				t.Errorf("roles %v, want %s", roles, want)
			}
			served := server.StarRDPRcvd
			switch tc.test {
			case ReadBW, ReadLat:
				served = server.StarGDRcvd
			case SendLat: // the client's SENDs are RDPs, the server's pulled by GDs
				served = min(server.StarRDPRcvd, server.StarGDRcvd)
			}
			if tc.test == SendBW || tc.test == SendLat {
				// Every RECV of the server went to its driver, and every one
				// a SEND filled came back as a CQEP (counted where it was
				// sent: the server stops polling when the client is done,
				// and a CQEP lost near the end is resent after a timeout).
				if server.StarWQEPSent == 0 || server.StarCQEPRcvd == 0 || client.StarCQEPSent-client.StarCQEPResent < uint64(cfg.Iters) {
					t.Errorf("server: %d WQEPs sent, %d CQEPs received; client: %d CQEPs sent (%d resent), want at least %d", server.StarWQEPSent, server.StarCQEPRcvd, client.StarCQEPSent, client.StarCQEPResent, cfg.Iters)
				}
			}
			if served == 0 || server.QPCResidentBytesPeak != 0 || server.StarSecurityDrops != 0 {
				t.Errorf("server: %d RDPs, %d GDs, resident peak %d bytes, sec drops %d", server.StarRDPRcvd, server.StarGDRcvd, server.QPCResidentBytesPeak, server.StarSecurityDrops)
			}
		})
	}
}

// TestStarRefuses: the tests a stateless server cannot serve, -b, a
// client without a selective scheme, a server NIC without StarServer,
// and one side without --star are each refused with their reason.
func TestStarRefuses(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Test: WriteLat, Star: true}, "write_lat needs the server to WRITE back"},
		{Config{Test: AtomicBW, Star: true}, "atomics are refused"},
		{Config{Test: WriteBW, Star: true, Bidirectional: true}, "-b"},
		{Config{Test: SendBW, Star: true, Bidirectional: true}, "-b"},
	} {
		tc.cfg.Sizes, tc.cfg.Iters = []int{8}, 10
		if err := tc.cfg.fill(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.cfg.Test, err, tc.want)
		}
	}

	m, err := verbs.NewEmbedded(sim.Config{Seed: 2}) // B without StarServer
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { m.Sim.RunRealtime(ctx, dataplane.RunConfig{}) })
	defer wg.Wait()
	defer cancel()
	cfg := Config{Test: WriteBW, Sizes: []int{8}, Iters: 10, Star: true}
	c1, c2 := net.Pipe()
	defer c2.Close()
	c1.Close()
	if _, err := Run(ctx, schemeDevice(m.B), c2, Server, cfg, Hooks{}); err == nil || !strings.Contains(err.Error(), "softnic run --star-server") {
		t.Errorf("server on a NIC without StarServer: %v", err)
	}
	gbn := cfg
	gbn.Schemes = []string{recovery.GBN}
	if _, err := Run(ctx, schemeDevice(m.A), c2, Client, gbn, Hooks{}); err == nil || !strings.Contains(err.Error(), "places out of order") {
		t.Errorf("client offering gbn only: %v", err)
	}

	// A StaR client against an ordinary server: the exchange fails on
	// both sides with both roles named.
	c1, c2 = net.Pipe()
	defer c1.Close()
	defer c2.Close()
	var srvErr error
	var srv sync.WaitGroup
	srv.Go(func() {
		plain := cfg
		plain.Star = false
		_, srvErr = Run(ctx, schemeDevice(m.B), c2, Server, plain, Hooks{})
	})
	_, cliErr := Run(ctx, schemeDevice(m.A), c1, Client, cfg, Hooks{})
	srv.Wait()
	if cliErr == nil || !strings.Contains(cliErr.Error(), "StaR roles do not pair: this side client, the peer none") {
		t.Errorf("client: %v", cliErr)
	}
	if srvErr == nil || !strings.Contains(srvErr.Error(), "StaR roles do not pair: this side none, the peer client") {
		t.Errorf("server: %v", srvErr)
	}
}
