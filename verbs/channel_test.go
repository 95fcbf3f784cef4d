package verbs

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/verbs/verbsd"
)

// chanPair is host A's and host B's contexts, embedded or on daemons.
type chanPair struct {
	a, b   *Context
	daemon *daemons // nil embedded
}

func newChanPair(t *testing.T, mode string) *chanPair {
	t.Helper()
	if mode == "embedded" {
		m, err := NewEmbedded(sim.Config{Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { m.Sim.RunRealtime(ctx, dataplane.RunConfig{}) })
		t.Cleanup(func() { stop(); wg.Wait() })
		return &chanPair{a: m.A, b: m.B}
	}
	d := startDaemons(t, sim.Config{Seed: 3}, true)
	a, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Dial(d.sockB)
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return &chanPair{a: a, b: b, daemon: d}
}

// newChanSide is newSide with the CQ on a completion channel.
func newChanSide(t *testing.T, ctx *Context, psn PSN) (*side, *CompChannel) {
	t.Helper()
	ch, err := ctx.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	s := &side{ctx: ctx, psn: psn}
	if s.pd, err = ctx.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if s.buf, err = ctx.AllocBuf(4096); err != nil {
		t.Fatal(err)
	}
	if s.mr, err = s.pd.RegMR(s.buf, allAccess); err != nil {
		t.Fatal(err)
	}
	if s.cq, err = ctx.CreateCQWithChannel(64, ch); err != nil {
		t.Fatal(err)
	}
	if s.qp, err = s.pd.CreateQP(QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: 16, MaxRecvWR: 16}); err != nil {
		t.Fatal(err)
	}
	return s, ch
}

func connectSides(t *testing.T, a, b *side) {
	t.Helper()
	ea, err := a.endpoint()
	if err != nil {
		t.Fatal(err)
	}
	eb, err := b.endpoint()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.connect(eb); err != nil {
		t.Fatal(err)
	}
	if err := b.connect(ea); err != nil {
		t.Fatal(err)
	}
}

// readable polls fd for up to timeout.
func readable(t *testing.T, fd int, timeout time.Duration) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(timeout/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return n == 1 && fds[0].Revents&unix.POLLIN != 0
	}
}

// quiet is how long a test waits to see that no event comes: long enough
// for a completion already seen to have fired one, were it going to.
const quiet = 30 * time.Millisecond

// TestCompChannel: in both modes, an armed CQ fires exactly one event for
// the next completion and none until armed again; the channel's FD is
// readable while an event is pending; a solicited-only arm ignores
// unsolicited receives but fires for a solicited SEND and for an error
// completion; a CQ with unacknowledged events and a channel with CQs are
// busy.
func TestCompChannel(t *testing.T) {
	for _, mode := range []string{"embedded", "daemon"} {
		t.Run(mode, func(t *testing.T) {
			p := newChanPair(t, mode)
			a, _ := newChanSide(t, p.a, 100)
			b, ch := newChanSide(t, p.b, 200)
			connectSides(t, a, b)
			for i := range 8 {
				rwr := RecvWR{WRID: uint64(100 + i), NumSGE: 1}
				rwr.SGL[0] = b.mr.SGE(0, 256)
				if err := b.qp.PostRecv(rwr); err != nil {
					t.Fatal(err)
				}
			}
			send := func(wrid uint64, flags SendFlags) {
				t.Helper()
				wr := SendWR{WRID: wrid, Opcode: WRSend, Flags: SendSignaled | flags, NumSGE: 1}
				wr.SGL[0] = a.mr.SGE(0, 64)
				if err := a.qp.PostSend(wr); err != nil {
					t.Fatal(err)
				}
				if wc, err := waitWC(a.cq, 10*time.Second); err != nil || wc.Status != WCSuccess {
					t.Fatalf("send %d: %+v, %v", wrid, wc, err)
				}
			}
			recv := func() WC {
				t.Helper()
				wc, err := waitWC(b.cq, 10*time.Second)
				if err != nil || wc.Status != WCSuccess || wc.Opcode != WCRecv {
					t.Fatalf("receive: %+v, %v", wc, err)
				}
				return wc
			}
			noEvent := func(when string) {
				t.Helper()
				if readable(t, ch.FD(), quiet) {
					t.Fatalf("%s: channel readable", when)
				}
				if cq, err := ch.TryGetEvent(0); cq != nil || err != nil {
					t.Fatalf("%s: event %v, %v", when, cq, err)
				}
			}
			event := func(when string) {
				t.Helper()
				if !readable(t, ch.FD(), 10*time.Second) {
					t.Fatalf("%s: channel not readable", when)
				}
				cq, err := ch.GetEvent()
				if err != nil || cq != b.cq {
					t.Fatalf("%s: GetEvent %p, %v; want the CQ %p", when, cq, err, b.cq)
				}
				cq.AckEvents(1)
			}

			plain, err := p.a.CreateCQ(4)
			if err != nil {
				t.Fatal(err)
			}
			if err := plain.ReqNotify(false); err == nil {
				t.Fatal("ReqNotify on a CQ without a channel succeeded")
			}
			plain.Destroy()
			noEvent("unarmed")
			send(1, 0)
			recv()
			noEvent("a completion of an unarmed CQ")

			// Armed: one event, then none until armed again.
			if err := b.cq.ReqNotify(false); err != nil {
				t.Fatal(err)
			}
			noEvent("armed, idle")
			send(2, 0)
			event("armed, a SEND arrived")
			recv()
			send(3, 0)
			recv()
			noEvent("after the event, not re-armed")

			// Solicited only.
			if err := b.cq.ReqNotify(true); err != nil {
				t.Fatal(err)
			}
			send(4, 0)
			if wc := recv(); wc.Flags&WCSolicited != 0 {
				t.Fatalf("unsolicited SEND's completion has the solicited flag: %+v", wc)
			}
			noEvent("solicited-only arm, unsolicited SEND")
			send(5, SendSolicited)
			event("solicited-only arm, solicited SEND")
			if wc := recv(); wc.Flags&WCSolicited == 0 {
				t.Fatalf("solicited SEND's completion lacks the solicited flag: %+v", wc)
			}

			// An error completion fires a solicited-only arm: moving the QP
			// to ERR flushes the receives still posted.
			if err := b.cq.ReqNotify(true); err != nil {
				t.Fatal(err)
			}
			if err := b.qp.Modify(&QPAttr{State: QPSErr}, AttrState); err != nil {
				t.Fatal(err)
			}
			if !readable(t, ch.FD(), 10*time.Second) {
				t.Fatal("flush: channel not readable")
			}
			cq, err := ch.GetEvent() // not acknowledged yet
			if err != nil || cq != b.cq {
				t.Fatalf("flush: %v, %v", cq, err)
			}
			if wc, err := waitWC(b.cq, 10*time.Second); err != nil || wc.Status != WCWRFlushErr {
				t.Fatalf("flush completion: %+v, %v", wc, err)
			}

			// Teardown: busy while events are unacknowledged or CQs use
			// the channel.
			if err := b.qp.Destroy(); err != nil {
				t.Fatal(err)
			}
			if err := b.cq.Destroy(); !errors.Is(err, dataplane.ErrBusy) {
				t.Fatalf("destroy CQ with an unacknowledged event: %v", err)
			}
			if err := ch.Destroy(); !errors.Is(err, dataplane.ErrBusy) {
				t.Fatalf("destroy a channel a CQ uses: %v", err)
			}
			b.cq.AckEvents(1)
			if err := b.cq.Destroy(); err != nil {
				t.Fatal(err)
			}
			if err := ch.Destroy(); err != nil {
				t.Fatal(err)
			}
			if _, err := ch.GetEvent(); !errors.Is(err, ErrClosed) {
				t.Fatalf("GetEvent on a destroyed channel: %v", err)
			}
			if p.daemon != nil {
				if o := p.daemon.b.Objects(); o.Channels != 0 || o.CQs != 0 {
					t.Fatalf("daemon B holds %+v", o)
				}
			}
		})
	}
}

// TestCompChannelArmRace: the ibverbs pattern (arm, poll again, block
// only if empty) never sleeps through a completion, however the arm and
// the completion interleave. Many single-message round trips.
func TestCompChannelArmRace(t *testing.T) {
	for _, mode := range []string{"embedded", "daemon"} {
		t.Run(mode, func(t *testing.T) {
			p := newChanPair(t, mode)
			a, _ := newChanSide(t, p.a, 100)
			b, ch := newChanSide(t, p.b, 200)
			connectSides(t, a, b)
			rwr := RecvWR{WRID: 7, NumSGE: 1}
			rwr.SGL[0] = b.mr.SGE(0, 256)
			wr := SendWR{WRID: 1, Opcode: WRSend, NumSGE: 1} // unsignaled: only B's CQ gets completions
			wr.SGL[0] = a.mr.SGE(0, 8)
			var wcs [4]WC
			for i := range 200 {
				if err := b.qp.PostRecv(rwr); err != nil {
					t.Fatal(err)
				}
				if err := a.qp.PostSend(wr); err != nil {
					t.Fatal(err)
				}
				got := 0
				for got == 0 {
					if err := b.cq.ReqNotify(false); err != nil {
						t.Fatal(err)
					}
					n, err := b.cq.Poll(wcs[:])
					if err != nil {
						t.Fatal(err)
					}
					if got += n; got > 0 {
						break
					}
					cq, err := ch.TryGetEvent(10 * time.Second)
					if err != nil || cq == nil {
						t.Fatalf("round %d: %v, %v", i, cq, err)
					}
					cq.AckEvents(1)
				}
			}
			// Drain an event a last round may have left (armed, then
			// found by the poll; the completion fired it anyway).
			for {
				cq, err := ch.TryGetEvent(0)
				if err != nil {
					t.Fatal(err)
				}
				if cq == nil {
					break
				}
				cq.AckEvents(1)
			}
		})
	}
}

// TestCompChannelNoAllocs: ReqNotify and Poll (the arm-then-poll step)
// do not allocate.
func TestCompChannelNoAllocs(t *testing.T) {
	for _, mode := range []string{"embedded", "daemon"} {
		t.Run(mode, func(t *testing.T) {
			p := newChanPair(t, mode)
			b, _ := newChanSide(t, p.b, 200)
			var wcs [4]WC
			var failure error
			allocs := testing.AllocsPerRun(100, func() {
				if err := b.cq.ReqNotify(false); err != nil {
					failure = err
				}
				if _, err := b.cq.Poll(wcs[:]); err != nil {
					failure = err
				}
			})
			if failure != nil || allocs != 0 {
				t.Fatalf("%v allocations per ReqNotify+Poll (%v)", allocs, failure)
			}
		})
	}
}

// TestCompChannelDaemonGone: a GetEvent blocked on a daemon context
// returns when the daemon goes away (ErrDisconnected) and when the
// context is closed (ErrClosed); it never blocks for ever.
func TestCompChannelDaemonGone(t *testing.T) {
	for _, how := range []string{"daemon closes", "context closes"} {
		t.Run(how, func(t *testing.T) {
			d := startDaemons(t, sim.Config{}, true)
			ctx, err := Dial(d.sockA)
			if err != nil {
				t.Fatal(err)
			}
			defer ctx.Close()
			ch, err := ctx.CreateCompChannel()
			if err != nil {
				t.Fatal(err)
			}
			cq, err := ctx.CreateCQWithChannel(16, ch)
			if err != nil {
				t.Fatal(err)
			}
			if err := cq.ReqNotify(false); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := ch.GetEvent()
				done <- err
			}()
			time.Sleep(20 * time.Millisecond) // let it block (the test holds either way)
			want := ErrDisconnected
			if how == "daemon closes" {
				d.a.Close()
			} else {
				ctx.Close()
				want = ErrClosed
			}
			select {
			case err := <-done:
				if !errors.Is(err, want) {
					t.Fatalf("GetEvent returned %v, want %v", err, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("GetEvent still blocked")
			}
		})
	}
}

// countFDs is how many descriptors this process (which runs the daemons)
// has open.
func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	return len(ents)
}

// TestCompChannelClientKilled: a client killed while blocked in GetEvent
// on an armed CQ leaves nothing behind in the daemon: no objects, no
// descriptors (its channel's eventfd is closed), and the daemon serves
// the next client's events as before.
func TestCompChannelClientKilled(t *testing.T) {
	d := startDaemons(t, sim.Config{}, true)
	dir := t.TempDir()
	// A first client opens whatever descriptors the daemon keeps for the
	// life of the server (the listener's, the poller's).
	warm, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	warm.Close()
	waitObjects(t, d.a, verbsd.Objects{})
	before := countFDs(t)
	for i := range 3 {
		cmd, out := startHelper(t, "chan-wait", "SOFTNIC_SOCK="+d.sockA, "SOFTNIC_DIR="+dir, "SOFTNIC_ROUND="+string(rune('0'+i)))
		if err := await(dir, "chan-ready"+string(rune('0'+i)), nil, 20*time.Second); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if o := d.a.Objects(); o.Channels != 1 || o.CQs != 1 {
			t.Fatalf("daemon holds %+v with the client blocked", o)
		}
		cmd.Process.Kill()
		cmd.Wait()
		waitObjects(t, d.a, verbsd.Objects{})
	}
	// Descriptors close asynchronously (the client's goroutines end);
	// give them a moment.
	deadline := time.Now().Add(10 * time.Second)
	for countFDs(t) > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := countFDs(t); after > before {
		t.Fatalf("daemon process had %d descriptors before the clients, %d after", before, after)
	}
	// Still healthy: a new client's armed CQ fires.
	p := &chanPair{daemon: d}
	if p.a, err = Dial(d.sockA); err != nil {
		t.Fatal(err)
	}
	defer p.a.Close()
	if p.b, err = Dial(d.sockB); err != nil {
		t.Fatal(err)
	}
	defer p.b.Close()
	a, _ := newChanSide(t, p.a, 1)
	b, ch := newChanSide(t, p.b, 2)
	connectSides(t, a, b)
	rwr := RecvWR{WRID: 7, NumSGE: 1}
	rwr.SGL[0] = b.mr.SGE(0, 64)
	if err := b.qp.PostRecv(rwr); err != nil {
		t.Fatal(err)
	}
	if err := b.cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	wr := SendWR{WRID: 1, Opcode: WRSend, NumSGE: 1}
	wr.SGL[0] = a.mr.SGE(0, 8)
	if err := a.qp.PostSend(wr); err != nil {
		t.Fatal(err)
	}
	if cq, err := ch.TryGetEvent(10 * time.Second); err != nil || cq != b.cq {
		t.Fatalf("event after the killed clients: %v, %v", cq, err)
	}
}
