// Command e2eclient is the verbs client of softnic's end-to-end tests
// (tests/e2e_test.go): a separate process, as an RDMA application is, that
// opens the softnic daemon of its host with verbs.Dial, creates a PD, one
// memory region in shared memory (Context.AllocBuf), two CQs and an RC QP,
// exchanges endpoints with its peer over TCP (package verbs/cm, as
// perftest does) and runs a plan of operations against the peer, checking
// every byte.
//
// Both sides run the same plan (--ops, --sizes and --rounds must match);
// one is the requester, which posts the work requests, the other the
// responder, which posts receives and owns the memory the requester
// targets. Each step is four TCP barriers (cm.Sync): agree on the step,
// "prepared" (the responder's receives are posted and its memory set),
// "requester done" (which carries the requester's outcome: the responder
// judges its memory only after a requester that succeeded), and the two
// verdicts. Between them the data moves only over RoCEv2, through the
// daemons.
//
// The memory region of each side has the same layout, M being the largest
// size rounded up to 64:
//
//	[0, M)            src: what this side sends or lets the peer read
//	[M, 2M+guard)     dst: where the peer's writes and sends land, and
//	                  the requester's READ results; poisoned before each
//	                  step so that stale data cannot pass and an overrun
//	                  into the guard bytes is caught
//	2M+guard          the atomic target (8 bytes, aligned)
//	2M+guard+8 ...    the requester's atomic results, two slots
//
// Data is a deterministic function of the step (fill), so both sides know
// what must arrive without shipping it.
//
// Output, one line each, on stdout: "connected ...", "ok OP SIZE round R"
// per step, "streaming" (--stream), and at the end "verified B bytes"
// (the payload bytes of the steps that passed, 8 per atomic) and "PASS n
// steps". An
// error is printed on stderr and the exit code is 1 (setup or check
// failed) or 3 (the peer went away).
//
// SEND_BACK is a SEND the other way: the responder SENDs (signaled) from
// its src into a receive the requester posted at its dst, and each checks
// its completion, the requester the data.
//
// --star runs StaR's stateless mode (docs/star.md): the requester's QP is
// a StaR client, the responder's a stateless StaR server (its daemon runs
// --star-server), and the plan may hold RDMA_WRITE, RDMA_READ, SEND,
// SEND_WITH_IMM and SEND_BACK (the server's RECVs and SENDs travel as
// WQEPs from its driver; write with immediate and atomics do not run).
//
// --stream is for the crash test: the requester keeps RDMA WRITEs of the
// largest size in flight until it is killed; the responder waits for the
// peer to go away.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// Exit codes.
const (
	exitFail     = 1
	exitUsage    = 2
	exitPeerGone = 3
)

// guard is how many bytes after each destination must stay poisoned.
const guard = 64

// poison fills destinations before a step; no data pattern is all 0xEE.
const poison = 0xEE

// Operation names, as ibverbs spells the opcodes.
var opcodes = map[string]verbs.WROpcode{
	"SEND":                 verbs.WRSend,
	"SEND_WITH_IMM":        verbs.WRSendWithImm,
	"RDMA_WRITE":           verbs.WRRDMAWrite,
	"RDMA_WRITE_WITH_IMM":  verbs.WRRDMAWriteWithImm,
	"RDMA_READ":            verbs.WRRDMARead,
	"SEND_BACK":            verbs.WRSend, // posted by the responder
	"ATOMIC_CMP_AND_SWP":   verbs.WRAtomicCmpAndSwp,
	"ATOMIC_FETCH_AND_ADD": verbs.WRAtomicFetchAndAdd,
}

const allOps = "SEND,SEND_WITH_IMM,RDMA_WRITE,RDMA_WRITE_WITH_IMM,RDMA_READ,ATOMIC_CMP_AND_SWP,ATOMIC_FETCH_AND_ADD"

// starOps are the operations a StaR connection runs.
var starOps = []string{"RDMA_WRITE", "RDMA_READ", "SEND", "SEND_WITH_IMM", "SEND_BACK"}

type config struct {
	socket    string
	listen    string
	connect   string
	requester bool
	ops       []string
	sizes     []int
	rounds    int
	seed      uint64
	stream    bool
	timeout   time.Duration
	scheme    string
	star      bool
	mtu       verbs.MTU
	// direct is the interface of direct mode (verbs.OpenDirect): the
	// engine in this process on directQueue, no daemon.
	direct      string
	directQueue int
	directIP    string
	netem       string
}

// errPeerGone is the peer's TCP connection ending.
var errPeerGone = errors.New("the peer went away")

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2eclient:", err)
		os.Exit(exitUsage)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "e2eclient:", err)
		if errors.Is(err, errPeerGone) {
			os.Exit(exitPeerGone)
		}
		os.Exit(exitFail)
	}
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("e2eclient", flag.ContinueOnError)
	fs.StringVar(&c.socket, "socket", "/run/softnic/softnic.sock", "control socket of this host's softnic daemon")
	fs.StringVar(&c.listen, "listen", "", "TCP address to accept the peer on (one of --listen, --connect)")
	fs.StringVar(&c.connect, "connect", "", "TCP address of the peer (one of --listen, --connect)")
	fs.BoolVar(&c.requester, "requester", false, "post the work requests (the peer must be the responder)")
	ops := fs.String("ops", allOps, "comma-separated operations")
	sizes := fs.String("sizes", "0,1,4095,65536,1048576", "comma-separated message sizes in bytes (atomics always move 8)")
	fs.IntVar(&c.rounds, "rounds", 1, "times to run the plan")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the data patterns (both sides must agree)")
	fs.BoolVar(&c.stream, "stream", false, "requester: RDMA WRITE the largest size without end; responder: wait for the peer to go away")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, "longest wait for one completion or one barrier")
	fs.StringVar(&c.scheme, "scheme", "", "loss recovery the QP asks for (both sides must agree; default: the daemon's)")
	fs.BoolVar(&c.star, "star", false, "StaR: the requester's QP is a StaR client, the responder's a stateless server (RDMA_WRITE, RDMA_READ, SEND, SEND_WITH_IMM and SEND_BACK only)")
	mtu := fs.Int("mtu", 1024, "path MTU of the connection: 256, 512, 1024, 2048 or 4096 (both sides must agree)")
	fs.StringVar(&c.direct, "direct", "", "run the NIC in this process in direct mode on this `interface` (no daemon; --socket is ignored)")
	fs.IntVar(&c.directQueue, "direct-queue", 0, "with --direct, the interface's receive queue to own")
	fs.StringVar(&c.netem, "netem", "", "with --direct, impair what this process's NIC receives, in netem's words (softnic run --netem; docs/impair.md)")
	fs.StringVar(&c.directIP, "direct-ip", "", "with --direct, the local address, the GID (default: the interface's first 198.18.0.0/15 address)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	m, err := qp.MTUFromBytes(*mtu)
	if err != nil {
		return c, fmt.Errorf("--mtu %d: %w", *mtu, err)
	}
	c.mtu = m
	if c.netem != "" && c.direct == "" {
		return c, errors.New("--netem impairs a direct-mode NIC (a daemon's is softnic run --netem)")
	}
	if (c.listen == "") == (c.connect == "") {
		return c, errors.New("give exactly one of --listen and --connect")
	}
	for _, op := range strings.Split(*ops, ",") {
		if _, ok := opcodes[op]; !ok {
			return c, fmt.Errorf("--ops: unknown operation %q (have %s)", op, allOps+",SEND_BACK")
		}
		if c.star && !slices.Contains(starOps, op) {
			return c, fmt.Errorf("--ops: %s on StaR QPs: only %s run (docs/star.md)", op, strings.Join(starOps, ", "))
		}
		c.ops = append(c.ops, op)
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 1<<30 {
			return c, fmt.Errorf("--sizes: bad size %q", s)
		}
		c.sizes = append(c.sizes, n)
	}
	return c, nil
}

// side is one end of the connection: the verbs objects and the peer.
type side struct {
	cfg    config
	ctx    *verbs.Context
	pd     *verbs.PD
	mr     *verbs.MR
	buf    []byte
	sendCQ *verbs.CQ
	recvCQ *verbs.CQ
	qp     *verbs.QP
	conn   net.Conn
	local  cm.Endpoint
	remote cm.Endpoint
	// Offsets into buf (see the package comment).
	m, dst, atomic, results int
}

func run(cfg config) error {
	m := (slices.Max(cfg.sizes) + 63) &^ 63
	s := &side{cfg: cfg, m: m, dst: m, atomic: 2*m + guard, results: 2*m + guard + 8}
	if err := s.open(); err != nil {
		return err
	}
	// Close ends the daemon connection, upon which the daemon destroys
	// every object this process created; the explicit teardown before it
	// exercises the destroy RPCs on the happy path.
	defer s.ctx.Close()
	if err := s.connect(); err != nil {
		return err
	}
	defer s.conn.Close()
	fmt.Printf("connected: qpn %#x to peer qpn %#x at %v, requester %v, scheme %s, StaR %v\n", s.local.QPN, s.remote.QPN, s.remote.GID, cfg.requester, s.qp.Scheme(), s.qp.Star())
	if cfg.stream {
		return s.streamRun()
	}
	steps, verified := 0, 0
	for round := range cfg.rounds {
		for _, op := range cfg.ops {
			sizes := cfg.sizes
			if strings.HasPrefix(op, "ATOMIC") {
				sizes = []int{8}
			}
			for _, size := range sizes {
				if err := s.step(op, size, round, steps); err != nil {
					return fmt.Errorf("round %d, %s of %d bytes: %w", round, op, size, err)
				}
				fmt.Printf("ok %s %d round %d\n", op, size, round)
				steps++
				verified += size
			}
		}
	}
	if err := s.teardown(); err != nil {
		return err
	}
	if cfg.direct != "" {
		// The NIC is this process's: its counters are printed here
		// (a daemon's are softnic stats).
		cs, err := s.ctx.Stats()
		if err != nil {
			return err
		}
		for _, c := range cs {
			if c.Value != 0 {
				fmt.Printf("counter %s %d\n", c.Name, c.Value)
			}
		}
	}
	fmt.Printf("verified %d bytes\n", verified)
	fmt.Printf("PASS %d steps\n", steps)
	return nil
}

// open creates the verbs objects.
func (s *side) open() error {
	var err error
	if s.cfg.direct != "" {
		s.ctx, err = verbs.OpenDirect(s.cfg.direct, verbs.DirectOptions{Queue: s.cfg.directQueue, IP: s.cfg.directIP, MTU: max(s.cfg.mtu.Bytes(), 1024)})
		if err == nil && s.cfg.netem != "" {
			_, err = s.ctx.SetNetem(s.cfg.netem)
		}
	} else {
		s.ctx, err = verbs.Dial(s.cfg.socket)
	}
	if err != nil {
		return err
	}
	attr, err := s.ctx.QueryDevice()
	if err != nil {
		return err
	}
	if s.pd, err = s.ctx.AllocPD(); err != nil {
		return err
	}
	if s.buf, err = s.ctx.AllocBuf(s.results + 16); err != nil {
		return err
	}
	access := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic
	if s.mr, err = s.pd.RegMR(s.buf, access); err != nil {
		return err
	}
	if s.sendCQ, err = s.ctx.CreateCQ(64); err != nil {
		return err
	}
	if s.recvCQ, err = s.ctx.CreateCQ(64); err != nil {
		return err
	}
	star := verbs.StarNone
	if s.cfg.star {
		star = verbs.StarServer
		if s.cfg.requester {
			star = verbs.StarClient
		}
	}
	if s.qp, err = s.pd.CreateQP(verbs.QPInitAttr{SendCQ: s.sendCQ, RecvCQ: s.recvCQ, MaxSendWR: 32, MaxRecvWR: 32, Scheme: s.cfg.scheme, Star: star}); err != nil {
		return err
	}
	s.local = cm.Endpoint{QPN: s.qp.QPN(), PSN: cm.RandomPSN(), GID: attr.GID, MAC: attr.MAC,
		RKey: s.mr.RKey, Addr: s.mr.Addr, Size: uint64(len(s.buf)), Schemes: []string{s.qp.Scheme()}, Star: star}
	if star == verbs.StarServer {
		if s.local.StarTable, err = s.qp.StarTable(); err != nil {
			return err
		}
	}
	return nil
}

// connect exchanges endpoints with the peer and brings the QP to RTS.
func (s *side) connect() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.timeout)
	defer cancel()
	var err error
	if s.cfg.listen != "" {
		s.conn, err = cm.Server(ctx, s.cfg.listen)
	} else {
		s.conn, err = cm.Client(ctx, s.cfg.connect, s.cfg.timeout)
	}
	if err != nil {
		return err
	}
	s.conn.SetDeadline(time.Now().Add(s.cfg.timeout))
	remote, err := cm.Exchange(s.conn, []cm.Endpoint{s.local})
	if err != nil {
		return peerErr(err)
	}
	s.remote = remote[0]
	if err := cm.AgreeStar(s.local.Star, s.remote.Star); err != nil {
		return err
	}
	if s.remote.Size != s.local.Size {
		return fmt.Errorf("the peer's region is %d bytes, this side's %d: run both with the same --sizes", s.remote.Size, s.local.Size)
	}
	// The peer is behind the testbed's switch: frames go to the
	// gateway's MAC, which the kernel knows, not to the peer's own.
	if s.remote.MAC, err = cm.NextHopMAC(s.remote.GID, s.remote.MAC, 5*time.Second); err != nil {
		return err
	}
	if err := cm.ConnectQP(s.qp, s.local, s.remote, verbs.ConnParam{MTU: s.cfg.mtu}); err != nil {
		return err
	}
	// Both QPs are in RTS (hence past RTR) before either side sends.
	return s.barrier("connected")
}

// barrier is cm.Sync with a check that both sides are at the same point.
func (s *side) barrier(what string) error {
	got, err := s.sync([]byte(what))
	if err != nil {
		return err
	}
	if string(got) != what {
		return fmt.Errorf("out of step: this side is at %q, the peer at %q (run both with the same plan)", what, got)
	}
	return nil
}

func (s *side) sync(payload []byte) ([]byte, error) {
	// Longer than a completion wait: the peer may spend up to that on
	// its side of a step before it comes to the barrier.
	s.conn.SetDeadline(time.Now().Add(3 * s.cfg.timeout))
	got, err := cm.Sync(s.conn, payload)
	return got, peerErr(err)
}

// peerErr marks errors that mean the peer's connection ended.
func peerErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("%w: %v", errPeerGone, err)
	}
	return err
}

// stepValues are what a step's data is derived from.
type stepValues struct {
	seed    uint64 // of the data pattern
	imm     uint32
	initial uint64 // the atomic target's value before the step
	operand uint64 // CMP_AND_SWP's swap value, FETCH_AND_ADD's addend
}

func values(seed uint64, index int) stepValues {
	x := mix(seed ^ uint64(index+1)*0x9e3779b97f4a7c15)
	return stepValues{seed: x, imm: uint32(mix(x + 1)), initial: mix(x + 2), operand: mix(x + 3)}
}

// mix is SplitMix64's finalizer: a bijective scramble of a counter.
func mix(x uint64) uint64 {
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// fill writes the pattern of seed into b.
func fill(b []byte, seed uint64) {
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(w[:], mix(seed+uint64(i)))
		copy(b[i:], w[:])
	}
}

// check reports the first byte of got that differs from the pattern of
// seed, and any guard byte after it that is no longer poison. got and
// guardBytes are memory the daemon writes into: they are copied once and
// judged from the copy, so that a write landing during the check cannot
// make the message contradict itself ("is 0x51, want 0x51").
func check(what string, got []byte, seed uint64, guardBytes []byte) error {
	got, guardBytes = slices.Clone(got), slices.Clone(guardBytes)
	want := make([]byte, len(got))
	fill(want, seed)
	for i := range got {
		if got[i] != want[i] {
			n := 0
			for j := i; j < len(got); j++ {
				if got[j] != want[j] {
					n++
				}
			}
			return fmt.Errorf("%s: byte %d of %d is %#02x, want %#02x (%d bytes differ)", what, i, len(got), got[i], want[i], n)
		}
	}
	for i, b := range guardBytes {
		if b != poison {
			return fmt.Errorf("%s: %d bytes arrived, but byte %d after them was overwritten (%#02x)", what, len(got), i, b)
		}
	}
	return nil
}

func (s *side) poisonDst(size int) {
	b := s.buf[s.dst : s.dst+size+guard]
	for i := range b {
		b[i] = poison
	}
}

func (s *side) sge(off, size int) (sgl [8]verbs.SGE, n int) {
	if size == 0 {
		return sgl, 0 // a zero-length message has no scatter/gather entry
	}
	sgl[0] = s.mr.SGE(off, size)
	return sgl, 1
}

// step runs one operation of the plan on both sides.
func (s *side) step(op string, size, round, index int) error {
	if err := s.barrier(fmt.Sprintf("step %d: %s %d round %d", index, op, size, round)); err != nil {
		return err
	}
	v := values(s.cfg.seed, index)
	var mine error
	if s.cfg.requester {
		mine = s.request(op, size, v)
	} else {
		mine = s.respond(op, size, v)
	}
	// Verdicts: both sides report, both fail if either did.
	msg := ""
	if mine != nil {
		msg = mine.Error()
	}
	theirs, err := s.sync([]byte(msg))
	switch {
	case mine != nil:
		return mine
	case err != nil:
		return err
	case len(theirs) > 0:
		return fmt.Errorf("the peer failed: %s", theirs)
	}
	return nil
}

// respond is the responder's side of a step.
func (s *side) respond(op string, size int, v stepValues) error {
	recv := op == "SEND" || op == "SEND_WITH_IMM" || op == "RDMA_WRITE_WITH_IMM"
	s.poisonDst(size)
	fill(s.buf[:size], v.seed) // what an RDMA READ fetches
	binary.LittleEndian.PutUint64(s.buf[s.atomic:], v.initial)
	if recv {
		wr := verbs.RecvWR{WRID: 1}
		if op != "RDMA_WRITE_WITH_IMM" { // a WRITE places by address, not into the receive
			wr.SGL, wr.NumSGE = s.sge(s.dst, size)
		}
		if err := s.qp.PostRecv(wr); err != nil {
			return err
		}
	}
	if err := s.barrier("prepared"); err != nil {
		return err
	}
	var stepErr error
	if op == "SEND_BACK" { // the requester's receive is posted: SEND into it
		stepErr = s.sendBack(size)
	}
	if recv {
		wc, err := s.await(s.recvCQ, "receive")
		switch {
		case err != nil:
			stepErr = err
		case wc.Status != verbs.WCSuccess:
			stepErr = fmt.Errorf("receive completion: status %v", wc.Status)
		case op == "RDMA_WRITE_WITH_IMM" && wc.Opcode != verbs.WCRecvRDMAWithImm, op != "RDMA_WRITE_WITH_IMM" && wc.Opcode != verbs.WCRecv:
			stepErr = fmt.Errorf("receive completion: opcode %v", wc.Opcode)
		case wc.ByteLen != uint32(size):
			stepErr = fmt.Errorf("receive completion: byte_len %d, want %d", wc.ByteLen, size)
		case op != "SEND" && (wc.Flags&verbs.WCWithImm == 0 || wc.ImmData != v.imm):
			stepErr = fmt.Errorf("receive completion: immediate %#x (flags %v), want %#x", wc.ImmData, wc.Flags, v.imm)
		case op == "SEND" && wc.Flags&verbs.WCWithImm != 0:
			stepErr = fmt.Errorf("receive completion of a SEND has an immediate")
		}
	}
	// The requester's completion means the data is placed here (an RC
	// ACK follows placement); its "done" says whether it has it. If it
	// has not (no completion in time, an error completion), what it sent
	// may still be on its way, retransmitted, and land here while this
	// side looks: the memory says nothing then, and is not judged.
	got, err := s.sync(doneMessage(nil))
	if err != nil {
		return err
	}
	requesterErr, err := parseDone(got)
	if err != nil {
		return err
	}
	if stepErr != nil {
		return stepErr
	}
	if requesterErr != "" {
		return fmt.Errorf("%s not checked here: the requester failed (%s)", op, requesterErr)
	}
	target := binary.LittleEndian.Uint64(s.buf[s.atomic:])
	switch op {
	case "SEND", "SEND_WITH_IMM", "RDMA_WRITE", "RDMA_WRITE_WITH_IMM":
		return check(op+" data", s.buf[s.dst:s.dst+size], v.seed, s.buf[s.dst+size:s.dst+size+guard])
	case "RDMA_READ", "SEND_BACK":
		// A READ, or a SEND from here, must leave the source alone.
		return check(op+" source", s.buf[:size], v.seed, nil)
	case "ATOMIC_CMP_AND_SWP":
		if target != v.operand {
			return fmt.Errorf("CMP_AND_SWP target is %#x, want the swap value %#x (initial %#x)", target, v.operand, v.initial)
		}
	case "ATOMIC_FETCH_AND_ADD":
		if target != v.initial+v.operand {
			return fmt.Errorf("FETCH_AND_ADD target is %#x, want %#x + %#x = %#x", target, v.initial, v.operand, v.initial+v.operand)
		}
	}
	return nil
}

// request is the requester's side of a step.
func (s *side) request(op string, size int, v stepValues) error {
	fill(s.buf[:size], v.seed) // what SENDs and WRITEs carry
	s.poisonDst(size)
	for i := range 16 {
		s.buf[s.results+i] = poison
	}
	back := op == "SEND_BACK"
	if back { // the responder SENDs into this receive
		wr := verbs.RecvWR{WRID: 1}
		wr.SGL, wr.NumSGE = s.sge(s.dst, size)
		if err := s.qp.PostRecv(wr); err != nil {
			return err
		}
	}
	if err := s.barrier("prepared"); err != nil {
		return err
	}
	wrs := s.workRequests(op, size, v)
	var stepErr error
	if back {
		stepErr = s.awaitRecv(size)
	}
	for i := range wrs {
		if err := s.qp.PostSend(wrs[i]); err != nil {
			stepErr = err
			break
		}
		wc, err := s.await(s.sendCQ, "send")
		if err != nil {
			stepErr = err
			break
		}
		if wc.Status != verbs.WCSuccess || wc.WRID != wrs[i].WRID {
			stepErr = fmt.Errorf("send completion of WR %d: status %v, wr_id %d", wrs[i].WRID, wc.Status, wc.WRID)
			break
		}
	}
	if stepErr == nil {
		stepErr = s.checkRequest(op, size, v)
	}
	got, err := s.sync(doneMessage(stepErr))
	if err != nil {
		return err
	}
	if _, err := parseDone(got); err != nil {
		return err
	}
	return stepErr
}

// The "requester done" barrier carries the requester's outcome: the
// responder judges its memory only after a requester that succeeded.
const (
	requesterDone   = "requester done"
	requesterFailed = "requester failed: "
)

// doneMessage is what a side sends at the "requester done" barrier: the
// responder, and a requester that succeeded, "requester done"; a
// requester that failed, "requester failed: " and why.
func doneMessage(requestErr error) []byte {
	if requestErr != nil {
		return []byte(requesterFailed + requestErr.Error())
	}
	return []byte(requesterDone)
}

// parseDone reads the peer's message at the "requester done" barrier:
// the requester's error ("" if it succeeded), or an error if the peer is
// at another point of the plan.
func parseDone(got []byte) (requesterErr string, err error) {
	switch msg := string(got); {
	case msg == requesterDone:
		return "", nil
	case strings.HasPrefix(msg, requesterFailed):
		return strings.TrimPrefix(msg, requesterFailed), nil
	default:
		return "", fmt.Errorf("out of step: this side is at %q, the peer at %q (run both with the same plan)", requesterDone, msg)
	}
}

// workRequests are the signaled work requests of a step. CMP_AND_SWP is
// tried twice: first with a compare value that does not match (the
// target must stay), then with the right one.
func (s *side) workRequests(op string, size int, v stepValues) []verbs.SendWR {
	wr := verbs.SendWR{WRID: 1, Opcode: opcodes[op], Flags: verbs.SendSignaled}
	switch op {
	case "SEND_BACK":
		return nil // the responder posts it
	case "SEND", "SEND_WITH_IMM", "RDMA_WRITE", "RDMA_WRITE_WITH_IMM":
		wr.SGL, wr.NumSGE = s.sge(0, size)
		wr.RemoteAddr, wr.RKey = s.remote.Addr+uint64(s.dst), s.remote.RKey
		wr.ImmData = v.imm
	case "RDMA_READ":
		wr.SGL, wr.NumSGE = s.sge(s.dst, size)
		wr.RemoteAddr, wr.RKey = s.remote.Addr, s.remote.RKey
	case "ATOMIC_FETCH_AND_ADD":
		wr.SGL, wr.NumSGE = s.sge(s.results, 8)
		wr.RemoteAddr, wr.RKey = s.remote.Addr+uint64(s.atomic), s.remote.RKey
		wr.CompareAdd = v.operand
	case "ATOMIC_CMP_AND_SWP":
		wr.SGL, wr.NumSGE = s.sge(s.results, 8)
		wr.RemoteAddr, wr.RKey = s.remote.Addr+uint64(s.atomic), s.remote.RKey
		wr.CompareAdd, wr.Swap = v.initial^1, ^v.operand
		second := wr
		second.WRID = 2
		second.SGL, second.NumSGE = s.sge(s.results+8, 8)
		second.CompareAdd, second.Swap = v.initial, v.operand
		return []verbs.SendWR{wr, second}
	}
	return []verbs.SendWR{wr}
}

// sendBack posts the responder's SEND_BACK from its src (filled by
// respond) and waits for its completion.
func (s *side) sendBack(size int) error {
	wr := verbs.SendWR{WRID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled}
	wr.SGL, wr.NumSGE = s.sge(0, size)
	if err := s.qp.PostSend(wr); err != nil {
		return err
	}
	wc, err := s.await(s.sendCQ, "send")
	switch {
	case err != nil:
		return err
	case wc.Status != verbs.WCSuccess || wc.WRID != 1 || wc.Opcode != verbs.WCSend:
		return fmt.Errorf("SEND_BACK completion: status %v, wr_id %d, opcode %v", wc.Status, wc.WRID, wc.Opcode)
	}
	return nil
}

// awaitRecv waits for the requester's receive of a SEND_BACK.
func (s *side) awaitRecv(size int) error {
	wc, err := s.await(s.recvCQ, "receive")
	switch {
	case err != nil:
		return err
	case wc.Status != verbs.WCSuccess || wc.WRID != 1 || wc.Opcode != verbs.WCRecv:
		return fmt.Errorf("SEND_BACK receive completion: status %v, wr_id %d, opcode %v", wc.Status, wc.WRID, wc.Opcode)
	case wc.ByteLen != uint32(size):
		return fmt.Errorf("SEND_BACK receive completion: byte_len %d, want %d", wc.ByteLen, size)
	case wc.Flags&verbs.WCWithImm != 0:
		return fmt.Errorf("SEND_BACK receive completion has an immediate")
	}
	return nil
}

// checkRequest checks what came back to the requester.
func (s *side) checkRequest(op string, size int, v stepValues) error {
	res := func(i int) uint64 { return binary.LittleEndian.Uint64(s.buf[s.results+8*i:]) }
	switch op {
	case "RDMA_READ", "SEND_BACK":
		return check(op+" data", s.buf[s.dst:s.dst+size], v.seed, s.buf[s.dst+size:s.dst+size+guard])
	case "ATOMIC_FETCH_AND_ADD":
		if res(0) != v.initial {
			return fmt.Errorf("FETCH_AND_ADD returned %#x, want the original %#x", res(0), v.initial)
		}
	case "ATOMIC_CMP_AND_SWP":
		if res(0) != v.initial || res(1) != v.initial {
			return fmt.Errorf("CMP_AND_SWP returned %#x (compare fails) and %#x (compare matches), want the original %#x both times", res(0), res(1), v.initial)
		}
	}
	return nil
}

// await polls cq for one completion. It spins briefly, then sleeps
// between polls: this machine's two cores are shared with both daemons.
func (s *side) await(cq *verbs.CQ, what string) (verbs.WC, error) {
	var wcs [1]verbs.WC
	deadline := time.Now().Add(s.cfg.timeout)
	for spins := 0; ; spins++ {
		n, err := cq.Poll(wcs[:])
		if err != nil {
			return verbs.WC{}, fmt.Errorf("poll %s CQ: %w", what, err)
		}
		if n == 1 {
			return wcs[0], nil
		}
		if time.Now().After(deadline) {
			return verbs.WC{}, fmt.Errorf("no %s completion within %v", what, s.cfg.timeout)
		}
		if spins < 1000 {
			runtime.Gosched()
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// streamRun: the requester keeps up to 8 RDMA WRITEs of the largest size
// in flight until it is killed; the responder waits for the requester's
// connection to end. Neither ever finishes on its own.
func (s *side) streamRun() error {
	if !s.cfg.requester {
		_, err := s.sync([]byte("streaming"))
		return err
	}
	size := slices.Max(s.cfg.sizes)
	fill(s.buf[:size], s.cfg.seed)
	wr := verbs.SendWR{Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
		RemoteAddr: s.remote.Addr + uint64(s.dst), RKey: s.remote.RKey}
	wr.SGL, wr.NumSGE = s.sge(0, size)
	const depth = 8
	inFlight, done := 0, 0
	for {
		for inFlight < depth {
			wr.WRID++
			if err := s.qp.PostSend(wr); err != nil {
				return err
			}
			inFlight++
		}
		wc, err := s.await(s.sendCQ, "send")
		if err != nil {
			return err
		}
		if wc.Status != verbs.WCSuccess {
			return fmt.Errorf("RDMA_WRITE %d: status %v", wc.WRID, wc.Status)
		}
		inFlight--
		if done++; done == 1 {
			fmt.Println("streaming")
		}
	}
}

// teardown destroys the objects in ibverbs order and releases the
// memory, so that the happy path exercises every destroy RPC.
func (s *side) teardown() error {
	if err := s.qp.Destroy(); err != nil {
		return err
	}
	for _, cq := range []*verbs.CQ{s.sendCQ, s.recvCQ} {
		if err := cq.Destroy(); err != nil {
			return err
		}
	}
	if err := s.mr.Dereg(); err != nil {
		return err
	}
	if err := s.pd.Dealloc(); err != nil {
		return err
	}
	return s.ctx.FreeBuf(s.buf)
}
