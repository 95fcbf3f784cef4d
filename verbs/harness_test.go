package verbs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/verbs/verbsd"
)

// This file is the harness of the daemon-mode tests: two verbs servers on
// the two engines of a sim.Sim run in real time (the daemon side of
// two hosts), and client processes that are this test binary run again
// with SOFTNIC_VERBS_HELPER set (the helper-process pattern of os/exec's
// own tests).

const helperEnv = "SOFTNIC_VERBS_HELPER"

func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		if err := runHelper(role); err != nil {
			fmt.Fprintf(os.Stderr, "helper %s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// daemons is host A's and host B's daemon side: a Sim's engines, a verbs
// server on each, and the real-time poll loop pumping both.
type daemons struct {
	sim          *sim.Sim
	a, b         *verbsd.Server
	sockA, sockB string
	stopLoop     func() // stops the poll loop (the servers stay)
}

// startDaemons starts both servers and, if realtime, the poll loop. A
// test that drives the Sim itself passes realtime false.
func startDaemons(t testing.TB, cfg sim.Config, realtime bool) *daemons {
	t.Helper()
	sim, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d := &daemons{sim: sim, sockA: filepath.Join(dir, "a.sock"), sockB: filepath.Join(dir, "b.sock")}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	if d.a, err = verbsd.New(sim.A, verbsd.Options{SocketPath: d.sockA, Logger: log.With("host", "A"), Wake: sim.Wake, Name: "softnic_a"}); err != nil {
		t.Fatal(err)
	}
	if d.b, err = verbsd.New(sim.B, verbsd.Options{SocketPath: d.sockB, Logger: log.With("host", "B"), Wake: sim.Wake, Name: "softnic_b"}); err != nil {
		d.a.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var serving, looping sync.WaitGroup
	for _, s := range []*verbsd.Server{d.a, d.b} {
		serving.Go(func() {
			if err := s.Serve(ctx); err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	d.stopLoop = func() {}
	if realtime {
		loopCtx, stop := context.WithCancel(ctx)
		looping.Go(func() {
			sim.RunRealtime(loopCtx, dataplane.RunConfig{
				// Both servers pump every round: no short circuit.
				Pump:       func() bool { a := d.a.Pump(); b := d.b.Pump(); return a || b },
				BeforeWait: func() { d.a.BeforeWait(); d.b.BeforeWait() },
			})
		})
		d.stopLoop = func() { stop(); looping.Wait() }
	}
	t.Cleanup(func() {
		d.a.Close()
		d.b.Close()
		cancel()
		serving.Wait()
		d.stopLoop()
	})
	return d
}

// waitObjects waits until s holds want.
func waitObjects(t testing.TB, s *verbsd.Server, want verbsd.Objects) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Objects() != want {
		if time.Now().After(deadline) {
			t.Fatalf("server holds %+v, want %+v", s.Objects(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startHelper runs this binary as a client process.
func startHelper(t *testing.T, role string, env ...string) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=" + role}, env...)...)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, out
}

// endpoint is what one side writes for the other: the connection
// exchange (verbs/cm does it over TCP; a file suffices between tests).
type endpoint struct {
	QPN  uint32
	PSN  PSN
	GID  netip.Addr
	MAC  [6]byte
	Addr uint64
	RKey uint32
}

func publish(dir, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name)) // readers see all of it or nothing
}

func await(dir, name string, v any, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil {
			if v == nil {
				return nil
			}
			return json.Unmarshal(b, v)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: %w", name, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// side is one host's verbs objects.
type side struct {
	ctx *Context
	pd  *PD
	buf []byte
	mr  *MR
	cq  *CQ
	qp  *QP
	psn PSN
}

const allAccess = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic

func newSide(ctx *Context, size, depth int, psn PSN) (*side, error) {
	s := &side{ctx: ctx, psn: psn}
	var err error
	if s.pd, err = ctx.AllocPD(); err != nil {
		return nil, err
	}
	if s.buf, err = ctx.AllocBuf(size); err != nil {
		return nil, err
	}
	if s.mr, err = s.pd.RegMR(s.buf, allAccess); err != nil {
		return nil, err
	}
	if s.cq, err = ctx.CreateCQ(4 * depth); err != nil {
		return nil, err
	}
	s.qp, err = s.pd.CreateQP(QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: depth, MaxRecvWR: depth})
	return s, err
}

func (s *side) endpoint() (endpoint, error) {
	dev, err := s.ctx.QueryDevice()
	return endpoint{QPN: s.qp.QPN(), PSN: s.psn, GID: dev.GID, MAC: dev.MAC, Addr: s.mr.Addr, RKey: s.mr.RKey}, err
}

// connect moves s.qp INIT -> RTR -> RTS towards peer, with timeouts
// short enough for a test yet far above the scheduling noise of a loaded
// two-core machine.
func (s *side) connect(peer endpoint) error {
	steps := []struct {
		a    QPAttr
		mask AttrMask
	}{
		{QPAttr{State: QPSInit, AccessFlags: allAccess, Port: 1},
			AttrState | AttrPKeyIndex | AttrPort | AttrAccessFlags},
		{QPAttr{State: QPSRTR, AV: AHAttr{DGID: peer.GID, DMAC: peer.MAC, HopLimit: 64}, PathMTU: MTU1024,
			DestQPN: peer.QPN, RQPSN: peer.PSN, MaxDestRdAtomic: 16, MinRNRTimer: 1},
			AttrState | AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer},
		{QPAttr{State: QPSRTS, SQPSN: s.psn, Timeout: 12, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
			AttrState | AttrSQPSN | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtomic},
	}
	for _, st := range steps {
		if err := s.qp.Modify(&st.a, st.mask); err != nil {
			return err
		}
	}
	return nil
}

// waitWC polls cq for one completion, yielding and then sleeping between
// empty polls: a client spinning flat out would starve the daemon's poll
// loop on a two-core machine.
func waitWC(cq *CQ, timeout time.Duration) (WC, error) {
	var wc [1]WC
	deadline := time.Now().Add(timeout)
	for spins := 0; ; spins++ {
		n, err := cq.Poll(wc[:])
		if err != nil {
			return WC{}, err
		}
		if n == 1 {
			return wc[0], nil
		}
		if time.Now().After(deadline) {
			return WC{}, errors.New("no completion in time")
		}
		if spins < 32 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// pattern is n deterministic pseudo-random bytes: data that a misplaced,
// repeated or truncated copy cannot match by accident.
func pattern(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
