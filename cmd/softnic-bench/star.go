package main

import (
	"fmt"
	"io"

	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/verbs"
)

// --star: StaR's stateless mode (docs/star.md), a softnic extension. The
// server side (no peer address) says --star server: its QPs are stateless
// StaR servers, and its daemon must run with --star-server. The client
// side says --star client: its QPs are StaR clients, on a scheme that
// places out of order. Both sides must say it (the exchange pairs a
// server only with a client). write_bw, read_bw, read_lat, send_bw,
// send_lat and rpc_lat run (the server's RECVs and SENDs travel as WQEPs
// from its driver); write_lat needs the server's own WRITEs, not built.

// checkStar checks --star against the side this process runs.
func (o *options) checkStar() error {
	if !o.set["star"] {
		return nil
	}
	want := "client"
	if o.server == "" {
		want = "server"
	}
	switch {
	case o.star != "server" && o.star != "client":
		return usagef("--star %q: server or client", o.star)
	case o.embedded:
		// Both sides run here: either word asks for a StaR run.
	case o.star != want:
		return usagef("--star %s on the %s side: the StaR server is the benchmark's server (no peer address), the StaR client its client", o.star, want)
	}
	cfg := perftest.Config{Test: o.verbs, Star: true, Bidirectional: o.bidir}
	if err := cfg.CheckStar(); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// starConfig makes c a StaR run. Without --scheme, both sides offer every
// scheme a StaR client can run (perftest.StarSchemes).
func (o *options) starConfig(c *perftest.Config) {
	if !o.set["star"] {
		return
	}
	c.Star = true
	if !o.set["scheme"] {
		c.Schemes = nil
	}
}

// starBanner prints the StaR roles of the run.
func (p *printer) starBanner(w io.Writer, c perftest.Connection) {
	if !p.o.set["star"] || len(c.Local) == 0 || len(c.Remote) == 0 {
		return
	}
	note := "stateless server: its NIC keeps no per-connection state"
	if c.Local[0].Star == verbs.StarClient {
		note = fmt.Sprintf("StaR client: %d-region memory table from the server", len(c.Remote[0].StarTable))
	}
	fmt.Fprintf(w, " StaR role       : %s, the peer %s (%s)\n", c.Local[0].Star, c.Remote[0].Star, note)
}

// checkStarDaemon fails a StaR server before it waits for a client, when
// its daemon does not serve StaR packets.
func (o *options) checkStarDaemon(dev perftest.Device) error {
	if o.star != "server" {
		return nil
	}
	d, err := dev.Ctx.QueryDevice()
	if err != nil {
		return err
	}
	if !d.StarServer {
		return fmt.Errorf("--star server: the daemon's NIC %s does not serve StaR packets: run its daemon with softnic run --star-server", d.Name)
	}
	return nil
}
