package perftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/internal/capture"
	"github.com/softnic/softnic/recovery"
	"github.com/softnic/softnic/verbs"
)

// Fabric describes the embedded mode's wire and NICs.
type Fabric struct {
	Link   Link   // both directions
	Scheme string // loss recovery of both NICs (default gbn)
	Seed   uint64 // seed of the fabric's loss
	IPv6   bool   // address the NICs by IPv6 GIDs
	// SchemeParams are both NICs' scheme knobs (zero: the schemes'
	// defaults, IRN's 100/320 µs timeouts among them).
	SchemeParams recovery.Params
	// Pcap, when set, receives a pcap of every frame NIC A (the client's)
	// sends and receives, stamped with the fabric's time; Hooks.Captured
	// gets the count at the end.
	Pcap io.Writer
}

// RunEmbedded runs cfg's test with both sides in this process: two NICs on
// the in-memory fabric, driven against the wall clock
// (Sim.RunRealtime) on their own goroutine, the server and the client
// each on theirs, connected by net.Pipe. Each side runs exactly the code
// it runs against the daemon, connection exchange included; only the
// Device differs. The client's rows are returned; hooks see the client's
// side.
func RunEmbedded(ctx context.Context, cfg Config, fab Fabric, hooks Hooks) (rows []Row, rerr error) {
	if fab.Scheme == "" {
		fab.Scheme = recovery.GBN
	}
	lc := fabric.LinkConfig{RateBps: fab.Link.RateBps, Delay: fab.Link.Delay, Loss: fab.Link.Loss, QueueFrames: fab.Link.Ring, Drop: fab.Link.Drop}
	m, err := verbs.NewEmbedded(sim.Config{Seed: fab.Seed, AtoB: lc, BtoA: lc, SchemeA: fab.Scheme, SchemeB: fab.Scheme, SchemeParams: fab.SchemeParams, IPv6: fab.IPv6, StarServerB: cfg.Star})
	if err != nil {
		return nil, fmt.Errorf("perftest: embedded fabric: %w", err)
	}
	if fab.Pcap != nil {
		tap, err := capture.AttachPcap(m.A.Engine(), fab.Pcap, 0, capture.All)
		if err != nil {
			return nil, err
		}
		// Runs after the deferred stop below: the poll loop has ended.
		defer func() {
			n, err := tap.Close()
			if err != nil && rerr == nil {
				rows, rerr = nil, fmt.Errorf("perftest: pcap: %w", err)
			}
			if hooks.Captured != nil {
				hooks.Captured(n)
			}
		}()
	}
	simCtx, stopSim := context.WithCancel(context.Background())
	var simDone sync.WaitGroup
	simDone.Go(func() { m.Sim.RunRealtime(simCtx, dataplane.RunConfig{}) })
	// The sides free their buffers only after deregistering them, so the
	// NICs never touch unmapped memory even while still running.
	defer func() {
		stopSim()
		simDone.Wait()
	}()

	device := func(c *verbs.Context) Device {
		e := c.Engine()
		return Device{Ctx: c, GID: e.Addr(), MAC: e.MAC(), Scheme: e.Scheme().Name(), Schemes: recovery.Names(), AllocBuf: MmapBuf, FreeBuf: MunmapBuf}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	clientConn, serverConn := net.Pipe()
	defer clientConn.Close()
	defer serverConn.Close()

	var serverErr error
	var server sync.WaitGroup
	server.Go(func() {
		_, serverErr = Run(runCtx, device(m.B), serverConn, Server, cfg, Hooks{})
		if serverErr != nil {
			// Unblock the client wherever it waits.
			cancel()
			serverConn.Close()
		}
	})
	rows, clientErr := Run(runCtx, device(m.A), clientConn, Client, cfg, hooks)
	if clientErr != nil {
		cancel()
		clientConn.Close()
	}
	server.Wait()
	if hooks.Counters != nil {
		hooks.Counters(m.A.Engine().Counters(), m.B.Engine().Counters())
	}
	// When one side fails the other usually fails because of it (a
	// closed pipe, a cancelled context, the client's failure relayed to
	// the server): report the cause.
	consequence := func(err error) bool {
		return errors.Is(err, errPeerFailed) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, net.ErrClosed) ||
			errors.Is(err, context.Canceled) || errors.Is(err, os.ErrDeadlineExceeded)
	}
	switch {
	case clientErr == nil && serverErr == nil:
		return rows, nil
	case clientErr != nil && (serverErr == nil || consequence(serverErr)):
		return rows, clientErr
	case serverErr != nil && (clientErr == nil || consequence(clientErr)):
		return rows, fmt.Errorf("server: %w", serverErr)
	}
	return rows, fmt.Errorf("client: %w; server: %v", clientErr, serverErr)
}
