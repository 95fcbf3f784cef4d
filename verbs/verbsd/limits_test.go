package verbsd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/verbs/internal/proto"
	"github.com/softnic/softnic/verbs/internal/shm"
)

// newServerLimits is newServer with limits.
func newServerLimits(t *testing.T, lim Limits) *Server {
	t.Helper()
	sim, err := sim.New(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(sim.A, Options{SocketPath: filepath.Join(t.TempDir(), "v.sock"), Wake: sim.Wake, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Serve(ctx) })
	t.Cleanup(func() { s.Close(); cancel(); wg.Wait() })
	return s
}

// waitFor polls until cond holds (the server drops a client on its own
// goroutine after the hang-up); the deadline only bounds a broken test.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// wantLimit checks that err is a limit refusal naming flag.
func wantLimit(t *testing.T, what string, err error, flag string) {
	t.Helper()
	if !errors.Is(err, proto.ErrLimit) {
		t.Fatalf("%s: %v; want a limit error", what, err)
	}
	if !strings.HasPrefix(err.Error(), "verbs: limit: ") || !strings.Contains(err.Error(), "(softnic run --"+flag) {
		t.Fatalf("%s: %q does not name the limit and --%s", what, err, flag)
	}
}

// ok fails the test on err and closes the descriptors a call returned.
func ok(t *testing.T, what string, fds []int, err error) {
	t.Helper()
	proto.CloseFDs(fds)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// usage is what the server counts against c's byte limits.
func usage(s *Server, c uint64) (ring, mr int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for cl := range s.clients {
		if cl.id == c {
			return cl.ringBytes, cl.mrBytes
		}
	}
	return -1, -1
}

// helloID opens r's session and returns its client id.
func (r *rawClient) helloID() uint64 {
	abi, _ := shm.Fingerprint()
	var res proto.HelloResult
	fds, err := r.call(proto.OpHello, proto.HelloArgs{Version: proto.Version, ABI: abi}, &res)
	ok(r.t, "hello", fds, err)
	return res.Client
}

func TestLimitObjects(t *testing.T) {
	const n = 3
	s := newServerLimits(t, Limits{PDs: n, QPs: n, CQs: n, MRs: n, Channels: n})
	a := dial(t, s)
	a.helloID()
	region, mem, err := shm.Create("limits-region", 4096, shm.SealSize)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(region)
	defer unix.Munmap(mem)

	refused := uint64(0)
	refuse := func(what, flag string, fds []int, err error) {
		t.Helper()
		proto.CloseFDs(fds)
		wantLimit(t, what, err, flag)
		refused++
		if got := s.LimitStats().Requests; got != refused {
			t.Fatalf("%s: %d refusals counted, want %d", what, got, refused)
		}
	}
	var pds, cqs, qps, mrs, chs []uint32
	for range n {
		var h proto.Handle
		fds, err := a.call(proto.OpAllocPD, nil, &h)
		ok(t, "alloc_pd", fds, err)
		pds = append(pds, h.Handle)
	}
	fds, err := a.call(proto.OpAllocPD, nil, nil)
	refuse("alloc_pd", "max-pds", fds, err)
	for range n {
		var h proto.Handle
		fds, err := a.call(proto.OpCreateCompChannel, nil, &h)
		ok(t, "create_comp_channel", fds, err)
		chs = append(chs, h.Handle)
	}
	fds, err = a.call(proto.OpCreateCompChannel, nil, nil)
	refuse("create_comp_channel", "max-channels", fds, err)
	for range n {
		var res proto.CreateCQResult
		fds, err := a.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: 16}, &res)
		ok(t, "create_cq", fds, err)
		cqs = append(cqs, res.Handle)
	}
	fds, err = a.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: 16}, nil)
	refuse("create_cq", "max-cqs", fds, err)
	for range n {
		var res proto.CreateQPResult
		fds, err := a.call(proto.OpCreateQP, proto.CreateQPArgs{PD: pds[0], SendCQ: cqs[0], RecvCQ: cqs[0], MaxSendWR: 4, MaxRecvWR: 4}, &res)
		ok(t, "create_qp", fds, err)
		qps = append(qps, res.Handle)
	}
	fds, err = a.call(proto.OpCreateQP, proto.CreateQPArgs{PD: pds[0], SendCQ: cqs[0], RecvCQ: cqs[0], MaxSendWR: 4, MaxRecvWR: 4}, nil)
	refuse("create_qp", "max-qps", fds, err)
	for range n {
		var res proto.RegMRResult
		fds, err := a.call(proto.OpRegMR, proto.RegMRArgs{PD: pds[0], Addr: 4096, Length: 4096}, &res, region)
		ok(t, "reg_mr", fds, err)
		mrs = append(mrs, res.Handle)
	}
	fds, err = a.call(proto.OpRegMR, proto.RegMRArgs{PD: pds[0], Addr: 4096, Length: 4096}, nil, region)
	refuse("reg_mr", "max-mrs", fds, err)

	// Another client, meanwhile, is served as usual.
	b := dial(t, s)
	b.helloID()
	var pd proto.Handle
	fds, err = b.call(proto.OpAllocPD, nil, &pd)
	ok(t, "second client: alloc_pd", fds, err)
	var cq proto.CreateCQResult
	fds, err = b.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: 16}, &cq)
	ok(t, "second client: create_cq", fds, err)
	fds, err = b.call(proto.OpCreateQP, proto.CreateQPArgs{PD: pd.Handle, SendCQ: cq.Handle, RecvCQ: cq.Handle, MaxSendWR: 4, MaxRecvWR: 4}, nil)
	ok(t, "second client: create_qp", fds, err)
	fds, err = b.call(proto.OpRegMR, proto.RegMRArgs{PD: pd.Handle, Addr: 4096, Length: 4096}, nil, region)
	ok(t, "second client: reg_mr", fds, err)
	fds, err = b.call(proto.OpCreateCompChannel, nil, nil)
	ok(t, "second client: create_comp_channel", fds, err)
	if got := s.LimitStats().Requests; got != refused {
		t.Fatalf("%d refusals counted, want %d", got, refused)
	}

	// A destroyed object makes room for another.
	for _, step := range []struct {
		destroy, create string
		h               uint32
		args            any
		fd              []int
	}{
		{proto.OpDestroyQP, proto.OpCreateQP, qps[n-1], proto.CreateQPArgs{PD: pds[0], SendCQ: cqs[0], RecvCQ: cqs[0], MaxSendWR: 4, MaxRecvWR: 4}, nil},
		{proto.OpDeregMR, proto.OpRegMR, mrs[n-1], proto.RegMRArgs{PD: pds[0], Addr: 4096, Length: 4096}, []int{region}},
		{proto.OpDestroyCQ, proto.OpCreateCQ, cqs[n-1], proto.CreateCQArgs{CQE: 16}, nil},
		{proto.OpDestroyCompChannel, proto.OpCreateCompChannel, chs[n-1], nil, nil},
		{proto.OpDeallocPD, proto.OpAllocPD, pds[n-1], nil, nil},
	} {
		fds, err := a.call(step.destroy, proto.Handle{Handle: step.h}, nil)
		ok(t, step.destroy, fds, err)
		fds, err = a.call(step.create, step.args, nil, step.fd...)
		ok(t, step.create+" after "+step.destroy, fds, err)
	}

	// The counters are in Options.Counters' form too.
	got := map[string]uint64{}
	s.LimitCounters(func(name string, v uint64) { got[name] = v })
	if got["client_limit_refusals"] != refused || got["client_conn_refusals"] != 0 {
		t.Fatalf("LimitCounters: %v", got)
	}
}

func TestLimitBytes(t *testing.T) {
	const ringMax, mrMax = 1 << 20, 3 * 4096
	s := newServerLimits(t, Limits{RingBytes: ringMax, MRBytes: mrMax})
	a := dial(t, s)
	id := a.helloID()
	var pd proto.Handle
	fds, err := a.call(proto.OpAllocPD, nil, &pd)
	ok(t, "alloc_pd", fds, err)

	// A deep CQ, as one client made 200 of to take 33 GB: refused before
	// anything is allocated.
	fds, err = a.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: proto.MaxCQE}, nil)
	proto.CloseFDs(fds)
	wantLimit(t, "create_cq of MaxCQE", err, "max-ring-bytes")
	// The engine's own bounds still apply first.
	fds, err = a.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: proto.MaxCQE + 1}, nil)
	proto.CloseFDs(fds)
	if err == nil || errors.Is(err, proto.ErrLimit) {
		t.Fatalf("create_cq beyond MaxCQE: %v", err)
	}
	var cq proto.CreateCQResult
	fds, err = a.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: 64}, &cq)
	ok(t, "create_cq of 64", fds, err)
	// A CQ counts its file and the engine's completion ring behind it.
	ringCQ, _ := usage(s, id)
	if want := int64(cq.Size) + dataplane.CQBytes(64); ringCQ != want {
		t.Fatalf("a CQ with a %d-byte file counts %d bytes, want %d", cq.Size, ringCQ, want)
	}
	// QPs until the rings are spent. Each counts its file and the
	// engine's own send and receive queues.
	var qps []uint32
	for {
		var res proto.CreateQPResult
		before, _ := usage(s, id)
		fds, err := a.call(proto.OpCreateQP, proto.CreateQPArgs{PD: pd.Handle, SendCQ: cq.Handle, RecvCQ: cq.Handle, MaxSendWR: 256, MaxRecvWR: 256}, &res)
		proto.CloseFDs(fds)
		if err != nil {
			wantLimit(t, "create_qp", err, "max-ring-bytes")
			if after, _ := usage(s, id); after != before {
				t.Fatalf("a refused QP left %d ring bytes counted", after-before)
			}
			break
		}
		after, _ := usage(s, id)
		if want := int64(res.Size) + dataplane.QueueBytes(256, 256); after-before != want {
			t.Fatalf("a QP with a %d-byte file counts %d bytes, want %d", res.Size, after-before, want)
		}
		qps = append(qps, res.Handle)
		if len(qps) > ringMax/4096 {
			t.Fatalf("%d QPs and no limit", len(qps))
		}
	}
	if ring, _ := usage(s, id); ring > ringMax || len(qps) == 0 {
		t.Fatalf("%d QPs, %d ring bytes counted, limit %d", len(qps), ring, ringMax)
	}
	for _, h := range qps {
		fds, err := a.call(proto.OpDestroyQP, proto.Handle{Handle: h}, nil)
		ok(t, "destroy_qp", fds, err)
	}
	if ring, _ := usage(s, id); ring != ringCQ {
		t.Fatalf("after destroying the QPs, %d ring bytes counted; want the CQ's %d", ring, ringCQ)
	}
	fds, err = a.call(proto.OpDestroyCQ, proto.Handle{Handle: cq.Handle}, nil)
	ok(t, "destroy_cq", fds, err)
	if ring, _ := usage(s, id); ring != 0 {
		t.Fatalf("after destroying everything, %d ring bytes counted", ring)
	}

	// Registered memory.
	region, mem, err := shm.Create("limits-region", 4*4096, shm.SealSize)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(region)
	defer unix.Munmap(mem)
	fds, err = a.call(proto.OpRegMR, proto.RegMRArgs{PD: pd.Handle, Addr: 4096, Length: 4 * 4096}, nil, region)
	proto.CloseFDs(fds)
	wantLimit(t, "reg_mr beyond the limit", err, "max-mr-bytes")
	var mr proto.RegMRResult
	fds, err = a.call(proto.OpRegMR, proto.RegMRArgs{PD: pd.Handle, Addr: 4096, Length: 2 * 4096}, &mr, region)
	ok(t, "reg_mr", fds, err)
	fds, err = a.call(proto.OpRegMR, proto.RegMRArgs{PD: pd.Handle, Addr: 4096, Length: 2 * 4096}, nil, region)
	proto.CloseFDs(fds)
	wantLimit(t, "second reg_mr", err, "max-mr-bytes")
	fds, err = a.call(proto.OpRegMR, proto.RegMRArgs{PD: pd.Handle, Addr: 4096, Length: 4096}, nil, region)
	ok(t, "reg_mr of the rest", fds, err)
	fds, err = a.call(proto.OpDeregMR, proto.Handle{Handle: mr.Handle}, nil)
	ok(t, "dereg_mr", fds, err)
	if _, m := usage(s, id); m != 4096 {
		t.Fatalf("%d registered bytes counted, want 4096", m)
	}
	if got := s.LimitStats().Requests; got != 4 {
		t.Fatalf("%d refusals counted, want 4", got)
	}
}

// uidRings is what the server counts against uid's ring limit.
func uidRings(s *Server) map[uint32]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.uidRingBytes)
}

// TestLimitRingBytesPerUID: one uid's connections together hold at most
// --max-ring-bytes-per-uid, each connection still at most
// --max-ring-bytes; what a connection held is the uid's again once it
// leaves.
func TestLimitRingBytesPerUID(t *testing.T) {
	const perConn, perUID = 1 << 20, 3 << 19
	s := newServerLimits(t, Limits{RingBytes: perConn, RingBytesPerUID: perUID})
	uid := uint32(os.Getuid())
	fill := func(r *rawClient, flag string) (id uint64, held int64) {
		t.Helper()
		id = r.helloID()
		var pd proto.Handle
		fds, err := r.call(proto.OpAllocPD, nil, &pd)
		ok(t, "alloc_pd", fds, err)
		var cq proto.CreateCQResult
		fds, err = r.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: 64}, &cq)
		ok(t, "create_cq", fds, err)
		for n := 0; ; n++ {
			fds, err := r.call(proto.OpCreateQP, proto.CreateQPArgs{PD: pd.Handle, SendCQ: cq.Handle, RecvCQ: cq.Handle, MaxSendWR: 64, MaxRecvWR: 64}, nil)
			proto.CloseFDs(fds)
			if err != nil {
				wantLimit(t, "create_qp", err, flag)
				break
			}
			if n > perUID/4096 {
				t.Fatal("no limit")
			}
		}
		held, _ = usage(s, id)
		return id, held
	}
	a := dial(t, s)
	_, heldA := fill(a, "max-ring-bytes") // refused by the connection's limit
	if heldA > perConn || heldA < perConn/2 {
		t.Fatalf("connection a holds %d bytes, limit %d", heldA, perConn)
	}
	b := dial(t, s)
	_, heldB := fill(b, "max-ring-bytes-per-uid") // refused by the uid's
	if got := uidRings(s)[uid]; got != heldA+heldB || got > perUID {
		t.Fatalf("uid counts %d ring bytes; connections hold %d + %d, limit %d", got, heldA, heldB, perUID)
	}
	if heldB >= perConn {
		t.Fatalf("connection b got %d bytes past the uid's limit", heldB)
	}
	if s.LimitStats().Requests != 2 {
		t.Fatalf("refusals %+v, want 2", s.LimitStats())
	}
	// a leaves: its bytes are the uid's again.
	a.c.C.Close()
	waitFor(t, "the client to be dropped", func() bool { return s.Objects().Clients == 1 })
	if got := uidRings(s)[uid]; got != heldB {
		t.Fatalf("after a left, uid counts %d ring bytes, want b's %d", got, heldB)
	}
	var cq proto.CreateCQResult
	fds, err := b.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: 64}, &cq)
	ok(t, "create_cq after a left", fds, err)
	b.c.C.Close()
	waitFor(t, "the client to be dropped", func() bool { return s.Objects().Clients == 0 })
	if got := uidRings(s); len(got) != 0 {
		t.Fatalf("no clients, and the uids count %v", got)
	}
}

func TestLimitConnsPerUID(t *testing.T) {
	const n = 3
	s := newServerLimits(t, Limits{ConnsPerUID: n})
	var conns []*rawClient
	for range n {
		r := dial(t, s)
		r.helloID()
		conns = append(conns, r)
	}
	// The next connection of this uid (the test's own) is answered with
	// the limit and hung up.
	extra := dial(t, s)
	abi, _ := shm.Fingerprint()
	fds, err := extra.call(proto.OpHello, proto.HelloArgs{Version: proto.Version, ABI: abi}, nil)
	proto.CloseFDs(fds)
	wantLimit(t, "hello over the per-uid limit", err, "max-conns-per-uid")
	if !strings.Contains(err.Error(), "3 connections per uid") {
		t.Fatalf("%q does not name the limit", err)
	}
	var resp proto.Response
	if _, err := extra.c.Recv(&resp); !errors.Is(err, io.EOF) {
		t.Fatalf("refused connection not closed: %v", err)
	}
	if st := s.LimitStats(); st.Conns != 1 || st.Requests != 0 {
		t.Fatalf("refusals %+v, want one connection", st)
	}
	// The admitted connections are served.
	var pd proto.Handle
	fds, err = conns[0].call(proto.OpAllocPD, nil, &pd)
	ok(t, "alloc_pd", fds, err)
	// One leaves: room for another.
	conns[1].c.C.Close()
	waitFor(t, "the client to be dropped", func() bool { return s.Objects().Clients == n-1 })
	again := dial(t, s)
	again.helloID()
	if st := s.LimitStats(); st.Conns != 1 {
		t.Fatalf("refusals %+v after a client left", st)
	}
}

// A client that says nothing after being refused is hung up on, and the
// accept loop serves others meanwhile.
func TestLimitConnsSilent(t *testing.T) {
	s := newServerLimits(t, Limits{ConnsPerUID: 1})
	a := dial(t, s)
	a.helloID()
	silent := dial(t, s)
	waitFor(t, "the refusal", func() bool { return s.LimitStats().Conns == 1 })
	var resp proto.Response
	if _, err := silent.c.Recv(&resp); !errors.Is(err, io.EOF) {
		t.Fatalf("silent refused connection: %v", err)
	}
	waitFor(t, "the refusal to end", func() bool { return s.refusing.Load() == 0 })
}

// softnicMaps counts this process's mappings of the daemon's ring files
// and of name.
func softnicMaps(t *testing.T, name string) (rings, named int) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for l := range bytes.Lines(b) {
		switch {
		case bytes.Contains(l, []byte("memfd:softnic-qp")), bytes.Contains(l, []byte("memfd:softnic-cq")):
			rings++
		case bytes.Contains(l, []byte("memfd:"+name)):
			named++
		}
	}
	return
}

// TestDropReleasesMemory: everything a client made the daemon map (QP and
// CQ rings, its regions) is unmapped, and every object and byte counted
// is gone, when the client leaves without destroying anything.
func TestDropReleasesMemory(t *testing.T) {
	s := newServerLimits(t, Limits{})
	const name = "drop-region"
	region, mem, err := shm.Create(name, 1<<16, shm.SealSize)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(region)
	defer unix.Munmap(mem)
	rings0, named0 := softnicMaps(t, name)
	fds0 := countFDs()

	a := dial(t, s)
	id := a.helloID()
	var pd proto.Handle
	fds, err := a.call(proto.OpAllocPD, nil, &pd)
	ok(t, "alloc_pd", fds, err)
	const cqs, qpsPerCQ, mrs = 20, 10, 20
	for range cqs {
		var ch proto.Handle
		fds, err := a.call(proto.OpCreateCompChannel, nil, &ch)
		ok(t, "create_comp_channel", fds, err)
		var cq proto.CreateCQResult
		fds, err = a.call(proto.OpCreateCQ, proto.CreateCQArgs{CQE: 1024, Channel: ch.Handle}, &cq)
		ok(t, "create_cq", fds, err)
		for range qpsPerCQ {
			fds, err := a.call(proto.OpCreateQP, proto.CreateQPArgs{PD: pd.Handle, SendCQ: cq.Handle, RecvCQ: cq.Handle, MaxSendWR: 64, MaxRecvWR: 64}, nil)
			ok(t, "create_qp", fds, err)
		}
	}
	for range mrs {
		fds, err := a.call(proto.OpRegMR, proto.RegMRArgs{PD: pd.Handle, Addr: 1 << 20, Length: 1 << 16}, nil, region)
		ok(t, "reg_mr", fds, err)
	}
	want := Objects{Clients: 1, PDs: 1, MRs: mrs, CQs: cqs, QPs: cqs * qpsPerCQ, Channels: cqs}
	if got := s.Objects(); got != want {
		t.Fatalf("server holds %+v, want %+v", got, want)
	}
	rings, named := softnicMaps(t, name)
	if rings-rings0 != cqs+cqs*qpsPerCQ || named-named0 != mrs {
		t.Fatalf("daemon maps %d rings and %d regions, want %d and %d", rings-rings0, named-named0, cqs+cqs*qpsPerCQ, mrs)
	}
	if ring, m := usage(s, id); ring <= 0 || m != mrs<<16 {
		t.Fatalf("counted %d ring bytes and %d registered bytes", ring, m)
	}

	a.c.C.Close()
	waitFor(t, "the client's objects to go", func() bool { return s.Objects() == Objects{} })
	if rings, named := softnicMaps(t, name); rings != rings0 || named != named0 {
		t.Fatalf("after the client left, %d ring and %d region mappings remain (before: %d, %d)", rings, named, rings0, named0)
	}
	if n := countFDs(); n != fds0 {
		t.Fatalf("%d descriptors open after the client left, %d before it came", n, fds0)
	}
	s.mu.Lock()
	uids := len(s.perUID)
	s.mu.Unlock()
	if uids != 0 {
		t.Fatalf("%d uids still counted", uids)
	}
}

func TestRateLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var r rateLog
	t0 := time.Unix(1000, 0)
	for i := range 100 {
		r.warnAt(t0.Add(time.Duration(i)*10*time.Millisecond), log, time.Second, "out of descriptors")
	}
	r.warnAt(t0.Add(2*time.Second), log, time.Second, "out of descriptors")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || strings.Contains(lines[0], "suppressed") || !strings.Contains(lines[1], "suppressed=99") {
		t.Fatalf("log:\n%s", buf.String())
	}
}

// TestAcceptOutOfDescriptors: when accept fails for lack of descriptors
// the loop backs off and warns at most once a second (not every 10 ms),
// and the waiting connection is served once descriptors are free again.
func TestAcceptOutOfDescriptors(t *testing.T) {
	h := &levelCounter{n: map[slog.Level]int{}}
	s, _ := newServerLog(t, slog.New(h))
	warnings := func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		n := 0
		for _, m := range h.msgs {
			if strings.Contains(m, "out of descriptors") {
				n++
			}
		}
		return n
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	restore := sync.OnceFunc(func() {
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
			t.Error(err)
		}
	})
	defer restore()
	// The client's socket takes the lowest free descriptor, so every number
	// below it is in use; with the limit just above it the server's accept
	// has none. The socket is made before the limit is lowered and
	// connected after, so the server cannot accept in between. (A count of
	// /proc/self/fd is not a limit: descriptors need not be dense.)
	sfd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = uint64(sfd) + 1
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		unix.Close(sfd)
		t.Skipf("cannot lower RLIMIT_NOFILE: %v", err)
	}
	start := time.Now()
	if err := unix.Connect(sfd, &unix.SockaddrUnix{Name: s.SocketPath()}); err != nil {
		restore()
		unix.Close(sfd)
		t.Fatal(err)
	}
	waitFor(t, "the accept loop to run out of descriptors", func() bool { return warnings() > 0 })
	// Let the loop fail a while longer.
	time.Sleep(300 * time.Millisecond)
	restore()
	f := os.NewFile(uintptr(sfd), "client")
	fc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	c := fc.(*net.UnixConn)
	defer c.Close()
	r := &rawClient{t: t, c: proto.NewConn(c)}
	r.hello(proto.Version)
	// At most one warning a second (and the first at once): a loop that
	// warned at every failure would have logged dozens.
	if n, most := warnings(), 1+int(time.Since(start)/time.Second); n > most {
		t.Fatalf("%d out-of-descriptor warnings in %v", n, time.Since(start))
	}
}

// TestMemReturn: requests while a return runs cost one more run, not one
// each, and none waits for it.
func TestMemReturn(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	// A hook of this returner's own: the returners of earlier tests'
	// servers may still be running freeOSMemory.
	m := memReturner{free: func() { started <- struct{}{}; <-release }}
	m.request()
	<-started
	for range 5 {
		m.request() // returns at once
	}
	close(release)
	<-started
	deadline := time.Now().Add(5 * time.Second)
	for m.runs.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if got := m.runs.Load(); got != 2 {
		t.Fatalf("%d runs for 6 requests (5 while one ran), want 2", got)
	}
	m.mu.Lock()
	running := m.running
	m.mu.Unlock()
	if running {
		t.Fatal("still running after the last run")
	}
}

// TestMemReturnWhenIdle: a small client leaving while another is
// connected forces no collection; the last one leaving does.
func TestMemReturnWhenIdle(t *testing.T) {
	s, _ := newServer(t)
	a, b := dial(t, s), dial(t, s)
	a.hello(proto.Version)
	b.hello(proto.Version)
	if _, err := a.call(proto.OpAllocPD, nil, nil); err != nil {
		t.Fatal(err)
	}
	gone := func(r *rawClient, clients int) {
		t.Helper()
		r.c.C.Close()
		waitFor(t, "the client to be dropped", func() bool { return s.Objects().Clients == clients })
	}
	runs := func() uint64 {
		// A run requested at the drop may still be under way.
		deadline := time.Now().Add(5 * time.Second)
		for {
			s.memReturn.mu.Lock()
			running := s.memReturn.running
			s.memReturn.mu.Unlock()
			if !running || time.Now().After(deadline) {
				return s.memReturn.runs.Load()
			}
			time.Sleep(time.Millisecond)
		}
	}
	gone(a, 1)
	if n := runs(); n != 0 {
		t.Fatalf("%d heap returns after a small client left with another still connected, want 0", n)
	}
	gone(b, 0)
	waitFor(t, "the heap return of the last client's drop", func() bool { return runs() == 1 })
}
