package verbsd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/dataplane/sim"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs/internal/proto"
	"github.com/softnic/softnic/verbs/internal/protoconv"
	"github.com/softnic/softnic/verbs/internal/shm"
)

// FuzzControl throws arbitrary control messages at a daemon, as a client
// that does not use the library (or means harm) could. One server runs
// per fuzzing process. For each input a client connects, says a valid
// hello, then sends msgs split at '\n' (at most fuzzMaxMsgs, each one
// SOCK_SEQPACKET message) and reads each reply; fds chooses, two bits a
// message, which descriptors go with it (fuzzFD*). Then the client hangs
// up, and whatever it sent:
//
//   - every reply was a well-formed proto.Response;
//   - once the connection is gone, the server and the engine hold no
//     object and the process no descriptor more than before the input;
//   - a fresh client can still say hello and allocate a PD.
//
// go test runs the seeds (valid requests, bogus handles, descriptors
// where none belong); go test -fuzz FuzzControl explores.
func FuzzControl(f *testing.F) {
	sim, err := sim.New(sim.Config{})
	if err != nil {
		f.Fatal(err)
	}
	s, err := New(sim.A, Options{SocketPath: filepath.Join(f.TempDir(), "v.sock"), Wake: sim.Wake})
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Serve(ctx) })
	f.Cleanup(func() { s.Close(); cancel(); wg.Wait() })
	// The region descriptor: a sealed memfd, as AllocBuf makes.
	memfd, mem, err := shm.Create("fuzz-region", 1<<16, shm.SealSize)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { unix.Munmap(mem); unix.Close(memfd) })
	null, err := os.Open(os.DevNull)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { null.Close() })
	fz := &fuzzer{s: s, sim: sim, memfd: memfd, null: int(null.Fd())}
	if err := fz.healthy(); err != nil {
		f.Fatal(err)
	}
	if err := fz.drained(fuzzDrainWait); err != nil {
		f.Fatal(err)
	}
	fz.fds = countFDs()

	for _, seed := range fuzzSeeds(sim.B.Addr()) {
		f.Add(seed.msgs, seed.fds)
	}
	f.Fuzz(func(t *testing.T, msgs []byte, fds uint16) {
		if err := fz.session(t, msgs, fds); err != nil {
			t.Fatal(err)
		}
		if err := fz.drained(fuzzDrainWait); err != nil {
			t.Fatal(err)
		}
		if err := fz.healthy(); err != nil {
			t.Fatalf("after the input: %v", err)
		}
		if err := fz.drained(fuzzDrainWait); err != nil {
			t.Fatalf("after the health check: %v", err)
		}
	})
}

const (
	fuzzMaxMsgs = 8
	// Descriptor choices, two bits per message.
	fuzzFDNone   = 0
	fuzzFDMemfd  = 1
	fuzzFDNull   = 2
	fuzzFDMany   = 3 // the memfd and proto.MaxFDs /dev/null: more than a message may carry
	fuzzReplyTTL = 30 * time.Second
	// fuzzDrainWait bounds the wait for a dropped connection's teardown:
	// a hang detector, generous for a loaded machine, not a speed check.
	fuzzDrainWait = 30 * time.Second
)

type fuzzer struct {
	s     *Server
	sim   *sim.Sim
	memfd int
	null  int
	fds   int // the process's descriptors with no client connected
}

func fuzzDial(path string) (*net.UnixConn, error) {
	return net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
}

// session runs one input on a fresh connection and hangs up; t's log
// gets each reply (go test -v shows what the seeds do).
func (fz *fuzzer) session(t *testing.T, msgs []byte, fds uint16) error {
	c, err := fuzzDial(fz.s.SocketPath())
	if err != nil {
		return err
	}
	defer c.Close()
	if err := fuzzHello(c); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	for i, m := range bytes.SplitN(msgs, []byte("\n"), fuzzMaxMsgs) {
		var send []int
		switch fds >> (2 * i) & 3 {
		case fuzzFDMemfd:
			send = []int{fz.memfd}
		case fuzzFDNull:
			send = []int{fz.null}
		case fuzzFDMany:
			send = []int{fz.memfd}
			for range proto.MaxFDs {
				send = append(send, fz.null)
			}
		}
		var oob []byte
		if len(send) > 0 {
			oob = unix.UnixRights(send...)
		}
		if _, _, err := c.WriteMsgUnix(m, oob, nil); err != nil {
			return nil // the server hung up (or the message cannot be sent): fine
		}
		var resp proto.Response
		ok, err := fuzzReply(c, &resp)
		if err != nil {
			return fmt.Errorf("message %d %q: %w", i, m, err)
		}
		if !ok {
			t.Logf("message %d (%d descriptors): the server hung up", i, len(send))
			return nil // as it may on a malformed message
		}
		if resp.Error != nil {
			t.Logf("message %d (%d descriptors): %s: %s", i, len(send), resp.Error.Code, resp.Error.Message)
		} else {
			t.Logf("message %d (%d descriptors): %s", i, len(send), resp.Result)
		}
	}
	return nil
}

// fuzzReply reads one response into resp (if not nil), closing any
// descriptors that came with it. It returns false if the server hung up
// and an error if it answered with something that is not a response or
// did not answer at all.
func fuzzReply(c *net.UnixConn, resp *proto.Response) (bool, error) {
	buf := make([]byte, proto.MaxMessage)
	oob := make([]byte, unix.CmsgSpace(proto.MaxFDs*4))
	c.SetReadDeadline(time.Now().Add(fuzzReplyTTL))
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	if oobn > 0 {
		proto.CloseFDs(proto.ParseRights(oob[:oobn]))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, fmt.Errorf("no reply in %v: server hung", fuzzReplyTTL)
	}
	if err != nil || n == 0 {
		return false, nil
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		return false, fmt.Errorf("reply truncated (flags %#x)", flags)
	}
	var r proto.Response
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		return false, fmt.Errorf("reply %q is not a response: %v", buf[:n], err)
	}
	if resp != nil {
		*resp = r
	}
	return true, nil
}

// fuzzCall sends one request and reads its response.
func fuzzCall(c *net.UnixConn, id uint64, op string, args any) (proto.Response, error) {
	req := proto.Request{ID: id, Op: op}
	if args != nil {
		req.Args, _ = json.Marshal(args)
	}
	b, _ := json.Marshal(req)
	if _, err := c.Write(b); err != nil {
		return proto.Response{}, err
	}
	var resp proto.Response
	ok, err := fuzzReply(c, &resp)
	if err != nil {
		return resp, err
	}
	if !ok {
		return resp, errors.New("server hung up")
	}
	if resp.Error != nil {
		return resp, protoconv.DecodeError(resp.Error)
	}
	return resp, nil
}

func fuzzHello(c *net.UnixConn) error {
	abi, err := shm.Fingerprint()
	if err != nil {
		return err
	}
	_, err = fuzzCall(c, 0, proto.OpHello, proto.HelloArgs{Version: proto.Version, ABI: abi})
	return err
}

// healthy: a fresh client says hello and allocates a PD.
func (fz *fuzzer) healthy() error {
	c, err := fuzzDial(fz.s.SocketPath())
	if err != nil {
		return fmt.Errorf("server unreachable: %w", err)
	}
	defer c.Close()
	if err := fuzzHello(c); err != nil {
		return fmt.Errorf("server refuses hello: %w", err)
	}
	resp, err := fuzzCall(c, 1, proto.OpAllocPD, nil)
	if err != nil {
		return fmt.Errorf("server refuses alloc_pd: %w", err)
	}
	var h proto.Handle
	if err := json.Unmarshal(resp.Result, &h); err != nil || h.Handle == 0 {
		return fmt.Errorf("alloc_pd answered %s (%v)", resp.Result, err)
	}
	return nil
}

// drained waits until the server has torn down every connection: no
// client, no object in the server or the engine, and no descriptor more
// than with no client (a doorbell's close may finish just after the
// teardown, in the runtime's poller). fz.fds 0: not known yet.
func (fz *fuzzer) drained(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	pause := 10 * time.Microsecond
	for {
		o, r := fz.s.Objects(), fz.sim.A.Resources()
		n := countFDs()
		if o == (Objects{}) && r == (dataplane.Resources{}) && (fz.fds == 0 || n <= fz.fds) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%v after the connection ended: server holds %+v, engine %+v, %d descriptors open (%d with no client)", limit, o, r, n, fz.fds)
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
}

// countFDs is how many descriptors the process has open.
func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

type fuzzSeed struct {
	msgs []byte
	fds  uint16
}

// fuzzSeeds are valid sessions and near misses. Handles count from 1 per
// connection in creation order (a failed create takes none).
func fuzzSeeds(peer netip.Addr) []fuzzSeed {
	type m struct {
		op   string
		args any
		fd   uint16
	}
	seq := func(ms ...m) fuzzSeed {
		var lines [][]byte
		var fds uint16
		for i, x := range ms {
			req := proto.Request{ID: uint64(i + 1), Op: x.op}
			if x.args != nil {
				switch a := x.args.(type) {
				case string:
					req.Args = json.RawMessage(a)
				default:
					req.Args, _ = json.Marshal(a)
				}
			}
			b, _ := json.Marshal(req)
			lines = append(lines, b)
			fds |= x.fd << (2 * i)
		}
		return fuzzSeed{bytes.Join(lines, []byte("\n")), fds}
	}
	region := func(pd uint32, access qp.Access) proto.RegMRArgs {
		return proto.RegMRArgs{PD: pd, Addr: 0x10000, Offset: 0, Length: 4096, Access: access}
	}
	h := func(n uint32) proto.Handle { return proto.Handle{Handle: n} }
	modify := func(q uint32, a dataplane.QPAttr, mask qp.AttrMask) proto.ModifyQPArgs {
		return proto.ModifyQPArgs{QP: q, Attr: protoconv.FromQPAttr(&a), Mask: mask}
	}
	toInit := modify(3, dataplane.QPAttr{State: qp.Init, Port: 1}, qp.AttrState|qp.AttrPKeyIndex|qp.AttrPort|qp.AttrAccessFlags)
	rtr := modify(3, dataplane.QPAttr{State: qp.RTR, AV: dataplane.AddressVector{DGID: peer}, PathMTU: qp.MTU1024, DestQPN: 0x10},
		qp.AttrState|qp.AttrAV|qp.AttrPathMTU|qp.AttrDestQPN|qp.AttrRQPSN|qp.AttrMaxDestRdAtomic|qp.AttrMinRNRTimer)
	rts := modify(3, dataplane.QPAttr{State: qp.RTS}, qp.AttrState|qp.AttrSQPSN|qp.AttrTimeout|qp.AttrRetryCnt|qp.AttrRNRRetry|qp.AttrMaxQPRdAtomic)
	qpArgs := proto.CreateQPArgs{PD: 1, SendCQ: 2, RecvCQ: 2, MaxSendWR: 4, MaxRecvWR: 4}
	return []fuzzSeed{
		seq(m{op: proto.OpAllocPD}),
		seq(m{op: proto.OpQueryDevice}, m{op: proto.OpStats}),
		// A region, then its teardown; one left for the hang-up to free.
		seq(m{op: proto.OpAllocPD}, m{op: proto.OpRegMR, args: region(1, qp.AccessLocalWrite|qp.AccessRemoteWrite), fd: fuzzFDMemfd},
			m{op: proto.OpRegMR, args: region(1, qp.AccessRemoteRead), fd: fuzzFDMemfd},
			m{op: proto.OpDeallocPD, args: h(1)}, m{op: proto.OpDeregMR, args: h(2)}),
		// Regions with bogus handles, bad flags, the wrong descriptors.
		seq(m{op: proto.OpRegMR, args: region(77, qp.AccessLocalWrite), fd: fuzzFDMemfd},
			m{op: proto.OpAllocPD},
			m{op: proto.OpRegMR, args: region(1, 0xffff), fd: fuzzFDMemfd},
			m{op: proto.OpRegMR, args: region(1, qp.AccessRemoteWrite), fd: fuzzFDMemfd},
			m{op: proto.OpRegMR, args: region(1, qp.AccessLocalWrite)},
			m{op: proto.OpRegMR, args: region(1, qp.AccessLocalWrite), fd: fuzzFDNull},
			m{op: proto.OpRegMR, args: proto.RegMRArgs{PD: 1, Addr: 1 << 63, Offset: 1 << 16, Length: 1 << 62, Access: qp.AccessLocalWrite}, fd: fuzzFDMemfd},

			m{op: proto.OpRegMR, args: region(1, qp.AccessLocalWrite), fd: fuzzFDMany}), // more descriptors than a message carries: hang-up

		// CQs and completion channels, in and out of order.
		seq(m{op: proto.OpCreateCQ, args: proto.CreateCQArgs{CQE: 8}},
			m{op: proto.OpCreateCompChannel},
			m{op: proto.OpCreateCQ, args: proto.CreateCQArgs{CQE: 1, Channel: 2}},
			m{op: proto.OpDestroyCompChannel, args: h(2)},
			m{op: proto.OpCreateCQ, args: proto.CreateCQArgs{CQE: 8, Channel: 99}},
			m{op: proto.OpDestroyCQ, args: h(3)},
			m{op: proto.OpDestroyCompChannel, args: h(2)},
			m{op: proto.OpDestroyCQ, args: h(1)}),
		// A QP through INIT, RTR and RTS, queried, destroyed out of order.
		seq(m{op: proto.OpAllocPD}, m{op: proto.OpCreateCQ, args: proto.CreateCQArgs{CQE: 8}},
			m{op: proto.OpCreateQP, args: qpArgs},
			m{op: proto.OpModifyQP, args: toInit}, m{op: proto.OpModifyQP, args: rtr}, m{op: proto.OpModifyQP, args: rts},
			m{op: proto.OpQueryQP, args: h(3)}, m{op: proto.OpDestroyCQ, args: h(2)}),
		seq(m{op: proto.OpAllocPD}, m{op: proto.OpCreateCQ, args: proto.CreateCQArgs{CQE: 8}},
			m{op: proto.OpCreateQP, args: proto.CreateQPArgs{PD: 1, SendCQ: 2, RecvCQ: 2, MaxSendWR: 4, MaxRecvWR: 4, Scheme: "no-such-scheme"}},
			m{op: proto.OpCreateQP, args: qpArgs},
			m{op: proto.OpSetQPScheme, args: proto.SetQPSchemeArgs{QP: 3, Scheme: "irn"}},
			m{op: proto.OpModifyQP, args: modify(3, dataplane.QPAttr{State: qp.Err}, qp.AttrState)},
			m{op: proto.OpDestroyQP, args: h(3)}, m{op: proto.OpDeallocPD, args: h(1)}),
		// Bogus handles for every destroy, a QP on objects that do not exist.
		seq(m{op: proto.OpDestroyQP, args: h(9)}, m{op: proto.OpDestroyCQ, args: h(0)}, m{op: proto.OpDeregMR, args: h(1 << 31)},
			m{op: proto.OpDeallocPD, args: h(5)}, m{op: proto.OpCreateQP, args: qpArgs},
			m{op: proto.OpModifyQP, args: toInit}, m{op: proto.OpQueryQP, args: h(3)}, m{op: proto.OpDestroyCompChannel, args: h(3)}),
		// Malformed messages: not JSON, wrong argument types, unknown
		// ops, a second hello, descriptors where none belong.
		{[]byte("not json"), 0},
		seq(m{op: proto.OpStats, fd: fuzzFDNull}, m{op: proto.OpQueryDevice, fd: fuzzFDMany},
			m{op: proto.OpDestroyQP, args: `"not an object"`}, m{op: "format_disk"},
			m{op: proto.OpCreateCQ, args: `{"cqe":-1}`}, m{op: proto.OpCreateCQ, args: `{"cqe":1e99}`},
			m{op: proto.OpHello, args: proto.HelloArgs{Version: proto.Version}}),
		{[]byte("{}\n{\"id\":1}\n{\"op\":\"alloc_pd\",\"args\":null}"), 0},
		{[]byte(""), fuzzFDMemfd},
	}
}
