package verbs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/fabric"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/verbs/internal/proto"
	"github.com/softnic/softnic/verbs/verbsd"
)

// TestDaemonAllOpcodes: two client processes, one per host, each with
// its own daemon, run every opcode against each other with the data
// checked byte for byte, on a clean fabric and at 1% loss both ways.
// When they exit, both daemons have freed everything.
func TestDaemonAllOpcodes(t *testing.T) {
	for _, loss := range []float64{0, 0.01} {
		t.Run(fmt.Sprintf("loss=%g%%", loss*100), func(t *testing.T) {
			link := func() fabric.LinkConfig {
				l := fabric.LinkConfig{Loss: loss, Delay: 5 * time.Microsecond, RateBps: 10e9, QueueFrames: 256}
				if loss > 0 {
					// Random loss may spare a short run; these drops make
					// sure both directions lose frames.
					n := 0
					l.Drop = func([]byte) bool { n++; return n == 7 || n == 40 }
				}
				return l
			}
			d := startDaemons(t, sim.Config{Seed: 11, AtoB: link(), BtoA: link()}, true)
			dir := t.TempDir()
			a, outA := startHelper(t, "peer-a", "SOFTNIC_SOCK="+d.sockA, "SOFTNIC_DIR="+dir)
			b, outB := startHelper(t, "peer-b", "SOFTNIC_SOCK="+d.sockB, "SOFTNIC_DIR="+dir)
			errA, errB := a.Wait(), b.Wait()
			if errA != nil || errB != nil {
				t.Fatalf("client A: %v\n%s\nclient B: %v\n%s", errA, outA, errB, outB)
			}
			waitObjects(t, d.a, verbsd.Objects{})
			waitObjects(t, d.b, verbsd.Objects{})
			for _, e := range []*dataplane.Engine{d.sim.A, d.sim.B} {
				if r := e.Resources(); r != (dataplane.Resources{}) {
					t.Errorf("engine still holds %+v", r)
				}
			}
			d.stopLoop()
			ab, ba := d.sim.Fabric.Stats(fabric.AtoB), d.sim.Fabric.Stats(fabric.BtoA)
			t.Logf("A->B %+v, B->A %+v", ab, ba)
			for _, e := range []*dataplane.Engine{d.sim.A, d.sim.B} {
				var nz []string
				c := e.Counters()
				c.Each(func(name string, v uint64) {
					if v != 0 {
						nz = append(nz, fmt.Sprintf("%s=%d", name, v))
					}
				})
				t.Logf("engine %v: %s", e.Addr(), strings.Join(nz, " "))
			}
			if loss > 0 && (ab.Dropped == 0 || ba.Dropped == 0) {
				t.Fatalf("lossy run lost nothing in some direction: %d, %d", ab.Dropped, ba.Dropped)
			}
		})
	}
}

// TestDaemonClientKilled: a client killed with SIGKILL in the middle of
// a transfer leaves nothing behind in its daemon, and the daemon serves
// the next client as before.
func TestDaemonClientKilled(t *testing.T) {
	d := startDaemons(t, sim.Config{Seed: 5}, true)
	dir := t.TempDir()
	cmd, out := startHelper(t, "flood", "SOFTNIC_SOCK="+d.sockA, "SOFTNIC_DIR="+dir)

	// Host B's side of the flood: a client in this process.
	ctxB, err := Dial(d.sockB)
	if err != nil {
		t.Fatal(err)
	}
	defer ctxB.Close()
	b, err := newSide(ctxB, 16*64<<10, 16, 0x42)
	if err != nil {
		t.Fatal(err)
	}
	var peer endpoint
	if err := await(dir, "flood.json", &peer, opTimeout); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := b.connect(peer); err != nil {
		t.Fatal(err)
	}
	ep, _ := b.endpoint()
	if err := publish(dir, "target.json", ep); err != nil {
		t.Fatal(err)
	}
	if err := await(dir, "started", nil, opTimeout); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := d.a.Objects(); got != (verbsd.Objects{Clients: 1, PDs: 1, MRs: 1, CQs: 1, QPs: 1}) {
		t.Fatalf("while flooding the daemon holds %+v", got)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waitObjects(t, d.a, verbsd.Objects{})
	if r := d.sim.A.Resources(); r != (dataplane.Resources{}) {
		t.Fatalf("engine A still holds %+v after the client died", r)
	}
	// B's objects belong to B's client and are untouched.
	if got := d.b.Objects(); got != (verbsd.Objects{Clients: 1, PDs: 1, MRs: 1, CQs: 1, QPs: 1}) {
		t.Fatalf("daemon B holds %+v", got)
	}

	// A new client on A works: WRITE to B, READ it back.
	ctxA, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	defer ctxA.Close()
	a, err := newSide(ctxA, 1<<20, 16, 0x99)
	if err != nil {
		t.Fatal(err)
	}
	b2 := &side{ctx: ctxB, pd: b.pd, buf: b.buf, mr: b.mr, cq: b.cq, psn: 0x55}
	if b2.qp, err = b.pd.CreateQP(QPInitAttr{SendCQ: b.cq, RecvCQ: b.cq, MaxSendWR: 4, MaxRecvWR: 4}); err != nil {
		t.Fatal(err)
	}
	epA, _ := a.endpoint()
	epB, _ := b2.endpoint()
	if err := b2.connect(epA); err != nil {
		t.Fatal(err)
	}
	if err := a.connect(epB); err != nil {
		t.Fatal(err)
	}
	msg := pattern(77, 50000)
	copy(a.buf, msg)
	wrs := []SendWR{
		{WRID: 1, Opcode: WRRDMAWrite, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{a.mr.SGE(0, len(msg))}, RemoteAddr: epB.Addr, RKey: epB.RKey},
		{WRID: 2, Opcode: WRRDMARead, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{a.mr.SGE(500000, len(msg))}, RemoteAddr: epB.Addr, RKey: epB.RKey},
	}
	if err := a.qp.PostSend(wrs...); err != nil {
		t.Fatal(err)
	}
	for i := range wrs {
		if wc, err := waitWC(a.cq, opTimeout); err != nil || wc.Status != WCSuccess || wc.WRID != wrs[i].WRID {
			t.Fatalf("after the kill: completion %+v, %v", wc, err)
		}
	}
	if !bytes.Equal(b.buf[:len(msg)], msg) || !bytes.Equal(a.buf[500000:500000+len(msg)], msg) {
		t.Fatal("after the kill: data differs")
	}
}

// TestDaemonForeignHandles: handles are per connection. A second client
// that names the first one's objects reaches nothing, and the first
// client's objects are unharmed.
func TestDaemonForeignHandles(t *testing.T) {
	d := startDaemons(t, sim.Config{Seed: 1}, true)
	owner, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	s, err := newSide(owner, 4096, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	intruder, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	defer intruder.Close()
	r := intruder.remote
	attr := proto.QPAttr{State: QPSErr}
	for _, c := range []struct {
		op   string
		args any
	}{
		{proto.OpModifyQP, proto.ModifyQPArgs{QP: s.qp.h, Attr: attr, Mask: AttrState}},
		{proto.OpQueryQP, proto.Handle{Handle: s.qp.h}},
		{proto.OpDestroyQP, proto.Handle{Handle: s.qp.h}},
		{proto.OpDeregMR, proto.Handle{Handle: s.mr.h}},
		{proto.OpDestroyCQ, proto.Handle{Handle: s.cq.h}},
		{proto.OpDeallocPD, proto.Handle{Handle: s.pd.h}},
		{proto.OpCreateQP, proto.CreateQPArgs{PD: s.pd.h, SendCQ: s.cq.h, RecvCQ: s.cq.h, MaxSendWR: 1, MaxRecvWR: 1}},
	} {
		if _, err := r.call(c.op, c.args, nil, nil); !errors.Is(err, ErrBadHandle) {
			t.Errorf("%s with the owner's handles: %v, want ErrBadHandle", c.op, err)
		}
	}
	// Through the API, objects of one context cannot be mixed into another.
	pd, err := intruder.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.CreateQP(QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: 1, MaxRecvWR: 1}); !errors.Is(err, ErrForeign) {
		t.Errorf("QP with another context's CQ: %v", err)
	}
	if a, err := s.qp.QueryAttr(); err != nil || a.State != QPSReset {
		t.Fatalf("owner's QP after the attempts: %v, %v", a.State, err)
	}
	if got := d.a.Objects(); got != (verbsd.Objects{Clients: 2, PDs: 2, MRs: 1, CQs: 1, QPs: 1}) {
		t.Fatalf("daemon holds %+v", got)
	}
}

// TestDaemonSocket: the socket is 0660, never world-accessible; a stale
// socket file is replaced, a live server's is not.
func TestDaemonSocket(t *testing.T) {
	d := startDaemons(t, sim.Config{}, false)
	fi, err := os.Stat(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v, want 0660", fi.Mode())
	}
	if _, err := verbsd.New(d.sim.A, verbsd.Options{SocketPath: d.sockA}); err == nil {
		t.Fatal("second server on a live socket")
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := verbsd.New(d.sim.A, verbsd.Options{SocketPath: file}); err == nil {
		t.Fatal("server replaced a regular file")
	}
	// A socket nobody answers on: what a killed daemon leaves.
	stale := filepath.Join(t.TempDir(), "stale.sock")
	s, err := verbsd.New(d.sim.A, verbsd.Options{SocketPath: stale})
	if err != nil {
		t.Fatal(err)
	}
	leaveSocketFile(t, s)
	s2, err := verbsd.New(d.sim.A, verbsd.Options{SocketPath: stale})
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	s2.Close()
}

// leaveSocketFile closes s's listener but keeps its file, as a crash would.
func leaveSocketFile(t *testing.T, s *verbsd.Server) {
	t.Helper()
	path := s.SocketPath()
	keep := path + ".keep"
	if err := os.Link(path, keep); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Rename(keep, path); err != nil {
		t.Fatal(err)
	}
}

// TestDaemonStats: the stats RPC gives the engine's counters by name, in
// the engine's order.
func TestDaemonStats(t *testing.T) {
	d := startDaemons(t, sim.Config{}, false)
	ctx, err := Dial(d.sockB)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	got, err := ctx.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	c := d.sim.B.Counters()
	c.Each(func(name string, _ uint64) { want = append(want, name) })
	if len(got) != len(want) {
		t.Fatalf("%d counters, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Name != want[i] {
			t.Fatalf("counter %d is %s, want %s", i, got[i].Name, want[i])
		}
	}
	dev, err := ctx.QueryDevice()
	if err != nil || dev.Name != "softnic_b" || dev.GID != d.sim.B.Addr() || dev.MAC != d.sim.B.MAC() || ctx.Name() != "softnic_b" {
		t.Fatalf("device %+v, %v", dev, err)
	}
}

// TestRegMRNeedsAllocBuf: the daemon can only register memory it can
// map, and says so.
func TestRegMRNeedsAllocBuf(t *testing.T) {
	d := startDaemons(t, sim.Config{}, false)
	ctx, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	pd, _ := ctx.AllocPD()
	if _, err := pd.RegMR(make([]byte, 4096), AccessLocalWrite); !errors.Is(err, ErrNotShared) {
		t.Fatalf("RegMR of Go memory: %v", err)
	}
	buf, err := ctx.AllocBuf(10000)
	if err != nil {
		t.Fatal(err)
	}
	// A region inside an allocation is fine; one that runs past it is not.
	mr, err := pd.RegMR(buf[100:5000], AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	if mr.Addr != uint64(addrOf(buf))+100 {
		t.Fatalf("region address %#x is not the client's address of its first byte", mr.Addr)
	}
	if err := ctx.FreeBuf(buf); !errors.Is(err, dataplane.ErrBusy) {
		t.Fatalf("FreeBuf under a registered region: %v", err)
	}
	if err := mr.Dereg(); err != nil {
		t.Fatal(err)
	}
	if err := ctx.FreeBuf(buf); err != nil {
		t.Fatal(err)
	}
}

// readIO returns the process's read and write system call counts
// (/proc/self/io syscr + syscw).
func readIO(t *testing.T) (uint64, bool) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, false
	}
	var n uint64
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && (k == "syscr" || k == "syscw") {
			x, _ := strconv.ParseUint(v, 10, 64)
			n += x
		}
	}
	return n, true
}

// TestRegMRAccess: in both modes RegMR refuses, as ibv_reg_mr does with
// EINVAL, access bits softnic does not define and remote write or atomic
// without local write; on a daemon context the library refuses before
// asking the daemon (the daemon checks too: verbsd's
// TestRegMRAccessFlags).
func TestRegMRAccess(t *testing.T) {
	bad := []Access{0xffff, AccessLocalWrite | 1<<4, 1 << 31, AccessRemoteWrite, AccessRemoteAtomic, AccessRemoteRead | AccessRemoteAtomic}
	good := []Access{0, AccessRemoteRead, AccessLocalWrite | AccessRemoteWrite, AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic}
	check := func(t *testing.T, ctx *Context, buf []byte, remote bool) {
		pd, err := ctx.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range bad {
			_, err := pd.RegMR(buf, a)
			if !errors.Is(err, dataplane.ErrBadAccess) {
				t.Errorf("RegMR with access %#x: %v; want ErrBadAccess", uint32(a), err)
			}
			var re *proto.RemoteError
			if remote && errors.As(err, &re) {
				t.Errorf("RegMR with access %#x went to the daemon: %v", uint32(a), err)
			}
		}
		for _, a := range good {
			mr, err := pd.RegMR(buf, a)
			if err != nil {
				t.Errorf("RegMR with access %#x: %v", uint32(a), err)
				continue
			}
			if err := mr.Dereg(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("embedded", func(t *testing.T) {
		m, err := NewEmbedded(sim.Config{})
		if err != nil {
			t.Fatal(err)
		}
		check(t, m.A, make([]byte, 4096), false)
	})
	t.Run("daemon", func(t *testing.T) {
		d := startDaemons(t, sim.Config{}, false)
		ctx, err := Dial(d.sockA)
		if err != nil {
			t.Fatal(err)
		}
		defer ctx.Close()
		buf, err := ctx.AllocBuf(4096)
		if err != nil {
			t.Fatal(err)
		}
		check(t, ctx, buf, true)
		if n := d.a.Objects().MRs; n != 0 {
			t.Fatalf("%d regions left registered", n)
		}
	})
}
