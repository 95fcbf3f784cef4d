package perftest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/recovery"
	"github.com/softnic/softnic/verbs"
)

// TestRunAppliesAgreedScheme: whatever each side offers, every QP of both
// sides runs the scheme the two agreed on, as the engines behind them
// show, and the rows name it. A side that offers nothing offers its NIC's
// default; a scheme the NIC does not have is refused before anything is
// exchanged.
func TestRunAppliesAgreedScheme(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		defaultA, defaultB       string // the NICs' default schemes
		offerClient, offerServer []string
		want                     string
	}{
		// The server's QPs are created with irn and switched to igbn. (The
		// runs are in wall-clock time: a selective scheme's 100 µs
		// RTO_low could fire spuriously on a loaded machine.)
		{"switch the server", recovery.GBN, recovery.GBN, []string{recovery.IGBN, recovery.GBN}, []string{recovery.IRN, recovery.IGBN, recovery.GBN}, recovery.IGBN},
		// The client offers its NIC's default (irn), the server its own
		// (gbn): the client's QPs, created with irn, are switched to gbn.
		{"NIC defaults differ", recovery.IRN, recovery.GBN, nil, nil, recovery.GBN},
		{"NIC defaults agree", recovery.IGBN, recovery.IGBN, nil, nil, recovery.IGBN},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := verbs.NewEmbedded(sim.Config{Seed: 17, SchemeA: tc.defaultA, SchemeB: tc.defaultB})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var sim sync.WaitGroup
			sim.Go(func() { m.Sim.RunRealtime(ctx, dataplane.RunConfig{}) })
			defer sim.Wait()
			defer cancel()

			// check runs in the Connected hook: every local QP, as the
			// engine runs it, and what the hook reports.
			check := func(e *dataplane.Engine, errp *error) func(Connection) {
				return func(c Connection) {
					var bad []string
					for _, ep := range c.Local {
						q := e.LookupQP(ep.QPN)
						if q == nil || e.QPScheme(q) != tc.want {
							bad = append(bad, fmt.Sprintf("QP %#x", ep.QPN))
						}
					}
					if len(bad) > 0 || c.Scheme != tc.want || c.QPScheme != tc.want {
						*errp = fmt.Errorf("agreed %s, QPs run %s, wrong on the engine: %v; want %s", c.Scheme, c.QPScheme, bad, tc.want)
					}
				}
			}
			cfg := Config{Test: WriteBW, Sizes: []int{512}, Iters: 60, QPs: 3, TxDepth: 4}
			c1, c2 := net.Pipe()
			defer c1.Close()
			defer c2.Close()
			var srvErr, srvCheck, cliCheck error
			var srvRows []Row
			var wg sync.WaitGroup
			wg.Go(func() {
				scfg := cfg
				scfg.Schemes = tc.offerServer
				srvRows, srvErr = Run(ctx, schemeDevice(m.B), c2, Server, scfg, Hooks{Connected: check(m.B.Engine(), &srvCheck)})
			})
			ccfg := cfg
			ccfg.Schemes = tc.offerClient
			rows, err := Run(ctx, schemeDevice(m.A), c1, Client, ccfg, Hooks{Connected: check(m.A.Engine(), &cliCheck)})
			wg.Wait()
			if err != nil || srvErr != nil {
				t.Fatal(err, srvErr)
			}
			if cliCheck != nil || srvCheck != nil {
				t.Fatalf("client: %v; server: %v", cliCheck, srvCheck)
			}
			if len(rows) != 1 || rows[0].Scheme != tc.want || len(srvRows) != 1 || srvRows[0].Scheme != tc.want {
				t.Fatalf("rows %+v / %+v, want scheme %s", rows, srvRows, tc.want)
			}
		})
	}

	m, err := verbs.NewEmbedded(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c1, _ := net.Pipe()
	defer c1.Close()
	_, err = Run(context.Background(), schemeDevice(m.A), c1, Client, Config{Test: WriteBW, Sizes: []int{8}, Iters: 1, Schemes: []string{"melo-9", "gbn"}}, Hooks{})
	if err == nil || !strings.Contains(err.Error(), `"melo-9"`) || !strings.Contains(err.Error(), recovery.IRN) {
		t.Fatalf("a scheme the NIC lacks: %v", err)
	}
}

// schemeDevice is a Device that knows its NIC's schemes, as the daemon's
// and RunEmbedded's do.
func schemeDevice(c *verbs.Context) Device {
	d := device(c)
	d.Scheme, d.Schemes = c.Engine().Scheme().Name(), recovery.Names()
	return d
}
