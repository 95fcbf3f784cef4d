package verbs

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/qp"
)

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// TestDaemonFastPath: posting and polling through the shared rings makes
// no allocation and no system call, the daemon's pump makes no
// allocation, and the doorbell is rung only while the daemon asks for it.
// This goroutine plays the poll loop (Pump, then the Sim's Step), so
// nothing else runs while it measures.
func TestDaemonFastPath(t *testing.T) {
	d := startDaemons(t, sim.Config{Seed: 3}, false)
	ctxA, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	defer ctxA.Close()
	ctxB, err := Dial(d.sockB)
	if err != nil {
		t.Fatal(err)
	}
	defer ctxB.Close()
	a, err := newSide(ctxA, 1<<20, 32, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newSide(ctxB, 1<<20, 32, 2)
	if err != nil {
		t.Fatal(err)
	}
	epA, _ := a.endpoint()
	epB, _ := b.endpoint()
	if err := a.connect(epB); err != nil {
		t.Fatal(err)
	}
	if err := b.connect(epA); err != nil {
		t.Fatal(err)
	}

	const n = 8
	var sends, writes [n]SendWR
	var recvs [n]RecvWR
	for i := range n {
		sends[i] = SendWR{WRID: uint64(i), Opcode: WRSend, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{a.mr.SGE(i*256, 256)}}
		writes[i] = SendWR{WRID: uint64(n + i), Opcode: WRRDMAWrite, Flags: SendSignaled, NumSGE: 1,
			SGL: [8]SGE{a.mr.SGE(65536+i*4096, 4096)}, RemoteAddr: epB.Addr + uint64(65536+i*4096), RKey: epB.RKey}
		recvs[i] = RecvWR{WRID: uint64(i), NumSGE: 1, SGL: [8]SGE{b.mr.SGE(i*256, 256)}}
	}
	wcs := make([]WC, 64)
	var failure error
	round := func() {
		if err := b.qp.PostRecv(recvs[:]...); err != nil {
			failure = err
			return
		}
		if err := a.qp.PostSend(sends[:]...); err != nil {
			failure = err
			return
		}
		if err := a.qp.PostSend(writes[:]...); err != nil {
			failure = err
			return
		}
		got := 0
		for step := 0; got < 3*n; step++ {
			if step > 10000 {
				failure = errors.New("round did not complete")
				return
			}
			d.a.Pump()
			d.b.Pump()
			k, err := a.cq.Poll(wcs)
			if err != nil {
				failure = err
				return
			}
			m, err := b.cq.Poll(wcs[k:])
			if err != nil {
				failure = err
				return
			}
			for _, wc := range wcs[:k+m] {
				if wc.Status != WCSuccess {
					failure = fmt.Errorf("completion %+v", wc)
					return
				}
			}
			got += k + m
			if k+m == 0 {
				d.sim.Step()
			}
		}
	}
	round() // first use: maps, pools and rings settle
	if failure != nil {
		t.Fatal(failure)
	}
	if allocs := testing.AllocsPerRun(50, round); allocs != 0 || failure != nil {
		t.Fatalf("%v allocations per round of %d posts and %d completions (%v)", allocs, 3*n, 3*n, failure)
	}

	// No read or write system call either: the only one the data path
	// has is the doorbell, and the daemon never asked for it here.
	if r0, ok := readIO(t); ok {
		r1, _ := readIO(t) // the cost of one look at the counters
		for range 20 {
			round()
		}
		r2, _ := readIO(t)
		if r2-r1 != r1-r0 {
			t.Fatalf("%d read/write system calls in 20 rounds", (r2-r1)-(r1-r0))
		}
	}
	if ctxA.remote.rung.Load() != 0 || ctxB.remote.rung.Load() != 0 {
		t.Fatal("doorbell rung while the daemon was awake")
	}

	// need_wakeup: raised by BeforeWait, the next post rings once; the
	// recheck pump that finds the work clears it; later posts do not ring.
	bells := func() uint64 { return ctxB.remote.rung.Load() }
	d.b.BeforeWait()
	if err := b.qp.PostRecv(recvs[0]); err != nil {
		t.Fatal(err)
	}
	if bells() != 1 {
		t.Fatalf("%d doorbells after posting to a sleeping daemon", bells())
	}
	if !d.b.Pump() {
		t.Fatal("recheck pump moved nothing")
	}
	if err := b.qp.PostRecv(recvs[1]); err != nil {
		t.Fatal(err)
	}
	if bells() != 1 {
		t.Fatal("doorbell rung after the daemon woke")
	}
	// A recheck that finds nothing leaves the flag up for the sleep.
	d.b.Pump()
	d.b.BeforeWait()
	d.b.Pump()
	if err := b.qp.PostRecv(recvs[2]); err != nil {
		t.Fatal(err)
	}
	if bells() != 2 {
		t.Fatalf("%d doorbells: a post during the sleep must ring", bells())
	}
}

// TestConformance runs one script of verbs calls, most of them errors,
// on an embedded context and on a daemon context over an identical fresh
// engine, and requires the same transcript: the same results, the same
// errors with the same messages, the same completions.
func TestConformance(t *testing.T) {
	m, err := NewEmbedded(sim.Config{Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	embedded := conformanceScript(t, m.A, m.B.Engine().Addr(), m.B.Engine().MAC(), func(cond func() bool) bool {
		return m.RunUntil(cond, time.Second)
	})

	d := startDaemons(t, sim.Config{Seed: 9}, true)
	ctx, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	daemon := conformanceScript(t, ctx, d.sim.B.Addr(), d.sim.B.MAC(), func(cond func() bool) bool {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if cond() {
				return true
			}
		}
		return false
	})
	for i := range max(len(embedded), len(daemon)) {
		var e, r string
		if i < len(embedded) {
			e = embedded[i]
		}
		if i < len(daemon) {
			r = daemon[i]
		}
		if e != r {
			t.Errorf("step %d:\n  embedded: %s\n  daemon:   %s", i, e, r)
		}
	}
	if testing.Verbose() {
		t.Logf("transcript:\n%s", strings.Join(daemon, "\n"))
	}
}

func conformanceScript(t *testing.T, ctx *Context, peerGID netip.Addr, peerMAC [6]byte, settle func(func() bool) bool) []string {
	var out []string
	note := func(step string, err error) {
		var pe *PostError
		switch {
		case err == nil:
			out = append(out, step+": ok")
		case errors.As(err, &pe):
			out = append(out, fmt.Sprintf("%s: bad WR %d: %v", step, pe.Index, pe.Err))
		default:
			out = append(out, step+": "+err.Error())
		}
	}
	must := func(err error) {
		if err != nil {
			t.Fatalf("conformance script: %v", err)
		}
	}
	dev, err := ctx.QueryDevice()
	must(err)
	out = append(out, fmt.Sprintf("device %+v", dev))
	pd, err := ctx.AllocPD()
	must(err)
	buf, err := ctx.AllocBuf(1 << 16)
	must(err)
	_, err = pd.RegMR(buf[:0], AccessLocalWrite)
	note("reg empty", err)
	_, err = pd.RegMR(buf, AccessRemoteWrite)
	note("reg remote write without local write", err)
	mr, err := pd.RegMR(buf, allAccess)
	must(err)
	out = append(out, fmt.Sprintf("keys %#x %#x", mr.LKey, mr.RKey))
	_, err = ctx.CreateCQ(0)
	note("cq of 0", err)
	_, err = ctx.CreateCQ(1 << 23)
	note("cq of 2^23", err)
	cq, err := ctx.CreateCQ(16)
	must(err)
	_, err = pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 0, MaxRecvWR: 4})
	note("qp of 0", err)
	_, err = pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 3, Scheme: "nope"})
	note("qp with an unknown scheme", err)
	q, err := pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 3})
	must(err)
	out = append(out, fmt.Sprintf("qpn %#x scheme %s", q.QPN(), q.Scheme()))
	note("scheme irn in RESET", q.SetScheme("irn"))
	note("scheme nope", q.SetScheme("nope"))
	out = append(out, "scheme "+q.Scheme())
	note("send in RESET", q.PostSend(SendWR{Opcode: WRSend}))
	note("recv in RESET", q.PostRecv(RecvWR{}))
	note("RESET to RTR", q.Modify(&QPAttr{State: QPSRTR}, AttrState))
	note("INIT without attributes", q.Modify(&QPAttr{State: QPSInit}, AttrState))
	note("INIT", q.Modify(&QPAttr{State: QPSInit, AccessFlags: allAccess, Port: 1}, AttrState|AttrPKeyIndex|AttrPort|AttrAccessFlags))
	note("scheme gbn in INIT", q.SetScheme("gbn"))
	out = append(out, "scheme "+q.Scheme())
	note("recv of 9 SGEs", q.PostRecv(RecvWR{NumSGE: 9}))
	note("recv past the region", q.PostRecv(RecvWR{NumSGE: 1, SGL: [8]SGE{mr.SGE(1<<16-10, 20)}}))
	note("recv with a stale key", q.PostRecv(RecvWR{NumSGE: 1, SGL: [8]SGE{{Addr: mr.Addr, Length: 8, LKey: mr.LKey + 1}}}))
	recv := func(id int) RecvWR { return RecvWR{WRID: uint64(id), NumSGE: 1, SGL: [8]SGE{mr.SGE(id*64, 64)}} }
	note("5 recvs into a queue of 4", q.PostRecv(recv(1), recv(2), recv(3), recv(4), recv(5)))
	a, err := q.QueryAttr()
	note(fmt.Sprintf("query %+v", a), err)
	note("dealloc a busy PD", pd.Dealloc())
	note("destroy a busy CQ", cq.Destroy())
	note("RTR", q.Modify(&QPAttr{State: QPSRTR, AV: AHAttr{DGID: peerGID, DMAC: peerMAC, HopLimit: 64}, PathMTU: MTU1024,
		DestQPN: 0x10, RQPSN: 5, MaxDestRdAtomic: 4, MinRNRTimer: 1},
		AttrState|AttrAV|AttrPathMTU|AttrDestQPN|AttrRQPSN|AttrMaxDestRdAtomic|AttrMinRNRTimer))
	note("scheme irn in RTR", q.SetScheme("irn"))
	out = append(out, "scheme "+q.Scheme())
	// No ACK timeout: the sends stay outstanding (the peer has no such QP).
	note("RTS", q.Modify(&QPAttr{State: QPSRTS, SQPSN: 7, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4},
		AttrState|AttrSQPSN|AttrTimeout|AttrRetryCnt|AttrRNRRetry|AttrMaxQPRdAtomic))
	note("send of 9 SGEs", q.PostSend(SendWR{NumSGE: 9}))
	note("send with opcode 99", q.PostSend(SendWR{Opcode: 99}))
	note("atomic on 4 bytes", q.PostSend(SendWR{Opcode: WRAtomicCmpAndSwp, NumSGE: 1, SGL: [8]SGE{mr.SGE(0, 4)}}))
	send := func(id int) SendWR {
		return SendWR{WRID: uint64(100 + id), Opcode: WRSend, Flags: SendSignaled, NumSGE: 1, SGL: [8]SGE{mr.SGE(0, 16)}}
	}
	note("5 sends into a queue of 4", q.PostSend(send(1), send(2), send(3), send(4), send(5)))
	note("ERR", q.Modify(&QPAttr{State: QPSErr}, AttrState))
	note("send in ERR", q.PostSend(send(6)))
	note("recv in ERR", q.PostRecv(recv(6)))
	var wcs []WC
	buf16 := make([]WC, 16)
	settle(func() bool {
		n, err := cq.Poll(buf16)
		if err != nil {
			t.Fatal(err)
		}
		wcs = append(wcs, buf16[:n]...)
		// 4 sends and 4 receives posted before ERR, and one of each
		// posted in ERR: 10 flushes.
		return len(wcs) >= 10
	})
	for _, wc := range wcs {
		out = append(out, fmt.Sprintf("wc %d %v %v qp %#x", wc.WRID, wc.Status, wc.Opcode, wc.QPNum))
	}
	note("destroy QP", q.Destroy())
	note("destroy QP again", q.Destroy())
	note("send on a destroyed QP", q.PostSend(send(7)))
	note("destroy CQ", cq.Destroy())
	_, err = cq.Poll(buf16)
	note("poll a destroyed CQ", err)
	note("dereg", mr.Dereg())
	note("dereg again", mr.Dereg())
	note("dealloc", pd.Dealloc())
	note("dealloc again", pd.Dealloc())
	stats, err := ctx.Stats()
	must(err)
	names := make([]string, len(stats))
	for i, c := range stats {
		names[i] = c.Name
	}
	out = append(out, "counters "+strings.Join(names, ","))
	return out
}

// TestDaemonUnsignaled: send WQEs posted unsignaled retire in the engine
// with no completion; their ring slots still come free for the client, as
// in embedded mode. The QP's send ring holds 4: 4 unsignaled WRITEs fill
// it, and once the peer acknowledged them 4 more fit (the last
// signaled), whose completion comes with all 8 WRITEs' data in place.
func TestDaemonUnsignaled(t *testing.T) {
	d := startDaemons(t, sim.Config{Seed: 4}, false)
	ctxA, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	defer ctxA.Close()
	ctxB, err := Dial(d.sockB)
	if err != nil {
		t.Fatal(err)
	}
	defer ctxB.Close()
	a, err := newSide(ctxA, 1<<16, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newSide(ctxB, 1<<16, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	epA, _ := a.endpoint()
	epB, _ := b.endpoint()
	if err := a.connect(epB); err != nil {
		t.Fatal(err)
	}
	if err := b.connect(epA); err != nil {
		t.Fatal(err)
	}
	copy(a.buf, pattern(5, len(a.buf)))
	write := func(i int, flags qp.SendFlags) SendWR {
		return SendWR{WRID: uint64(i), Opcode: WRRDMAWrite, Flags: flags, NumSGE: 1,
			SGL: [8]SGE{a.mr.SGE(i*1024, 1024)}, RemoteAddr: epB.Addr + uint64(i*1024), RKey: epB.RKey}
	}
	for i := range 4 {
		if err := a.qp.PostSend(write(i, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.qp.PostSend(write(4, 0)); !errors.Is(err, dataplane.ErrQueueFull) {
		t.Fatalf("fifth WQE in a ring of 4: %v", err)
	}
	posted := 4
	wcs := make([]WC, 8)
	for step := 0; ; step++ {
		if step > 100000 {
			t.Fatalf("%d WRITEs posted; the ring never came free", posted)
		}
		d.a.Pump()
		d.b.Pump()
		for posted < 8 {
			var flags qp.SendFlags
			if posted == 7 {
				flags = SendSignaled
			}
			if err := a.qp.PostSend(write(posted, flags)); err != nil {
				if !errors.Is(err, dataplane.ErrQueueFull) {
					t.Fatal(err)
				}
				break
			}
			posted++
		}
		n, err := a.cq.Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			if n != 1 || wcs[0].WRID != 7 || wcs[0].Status != WCSuccess {
				t.Fatalf("completions %+v", wcs[:n])
			}
			break
		}
		d.sim.Step()
	}
	if !bytes.Equal(b.buf[:8*1024], a.buf[:8*1024]) {
		t.Fatal("the WRITEs' data differs")
	}
}
