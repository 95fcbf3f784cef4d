//go:build linux

package conform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// The suite on real wires: the two-host namespace testbed
// (scripts/testbed.sh), softnic switch in the switch namespace applying
// the case's rules and writing the trace, one softnic daemon per host,
// and the case's workload posted through package verbs by this process
// (both QPs: it dials both daemons' control sockets and connects the QPs
// itself, so no exchange over TCP is needed, and it reads the
// responder's memory, which it allocated, to check the data).
//
// The rule files name the flow by source address, kind and psn_offset
// (counted from the flow's first PSN), so they hold whatever QPNs and
// PSNs the daemons choose.

// TestbedHost is one host of the testbed: its namespace, its interface
// towards the switch and its address (the daemon's GID).
type TestbedHost struct {
	NS    string
	Iface string
	IP    netip.Addr
}

// TestbedHosts is a running two-host testbed: A the requester, B the
// responder, the switch namespace and its ports facing A and B.
type TestbedHosts struct {
	A, B             TestbedHost
	Switch           string
	SwitchA, SwitchB string
}

// UpTestbed brings up scripts/testbed.sh's two-host testbed under prefix
// (SOFTNIC_NS_PREFIX, at most 12 characters) with the kernel forwarding
// everything the switch's XDP program passes; down removes it.
func UpTestbed(script, prefix string) (hosts TestbedHosts, down func() error, err error) {
	run := func(args ...string) (string, error) {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), "SOFTNIC_NS_PREFIX="+prefix, "SOFTNIC_HOSTS=2", "SOFTNIC_SWITCH=kernel")
		out, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("testbed.sh %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return string(out), err
	}
	down = func() error { _, err := run("down"); return err }
	if _, err := run("up"); err != nil {
		down()
		return hosts, nil, err
	}
	out, err := run("hosts")
	if err != nil {
		down()
		return hosts, nil, err
	}
	var hs []TestbedHost
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var name, ns, iface, v4, v6 string
		if _, err := fmt.Sscan(line, &name, &ns, &iface, &v4, &v6); err != nil {
			down()
			return hosts, nil, fmt.Errorf("testbed.sh hosts: line %q: %w", line, err)
		}
		ip, err := netip.ParseAddr(v4)
		if err != nil {
			down()
			return hosts, nil, fmt.Errorf("testbed.sh hosts: line %q: %w", line, err)
		}
		hs = append(hs, TestbedHost{NS: ns, Iface: iface, IP: ip})
	}
	if len(hs) != 2 {
		down()
		return hosts, nil, fmt.Errorf("testbed.sh hosts: %d hosts, want 2", len(hs))
	}
	return TestbedHosts{A: hs[0], B: hs[1], Switch: prefix + "-sw", SwitchA: "sw-a", SwitchB: "sw-b"}, down, nil
}

// TestbedRunner runs cases on a testbed.
type TestbedRunner struct {
	Hosts   TestbedHosts
	Softnic string // the softnic binary (run, switch, stats)
	Dir     string // where sockets, rule files and traces go
	// TimerShift multiplies every timer of the fabric's Setup by
	// 2^TimerShift: the QPs' local ACK timeout code (DefaultTimeout +
	// TimerShift), the selective schemes' RTO_low and RTO_high and the
	// NAK interval. 0 is the fabric's timers, made for a NIC that takes
	// no time; a real-wire round trip through three processes on a
	// shared host can take longer than RTO_low, and a timer that fires
	// before the answer can come turns every check into a finding about
	// the host. The scaling keeps the timers' order (NAK interval < ACK
	// timeout, RTO_low < RTO_high), which is all the checks rely on.
	TimerShift uint8
	Log        io.Writer // each run's outline (nil: none)
	// DaemonArgs are more flags for both daemons (after daemonArgs').
	DaemonArgs []string
	// KeepFailed, if set, is a directory where RunTestbedSuite writes each
	// run that fails a check: its switch trace (SCHEME-CASE-RUN.trace,
	// which `softnic-sweep conform -trace` reads) and what it observed
	// (SCHEME-CASE-RUN.json: the failing checks, both NICs' counters).
	KeepFailed string

	macA, macB [6]byte // the switch's ports: the hosts' next hops
	seq        int
}

// recvSettle is how long the runner waits after posting a receive.
const recvSettle = 20 * time.Millisecond

// runLimitWall bounds a workload on real wires.
const runLimitWall = 5 * time.Second

// daemonArgs are softnic run's flags that make a daemon's NIC the
// fabric's (Setup's defaults): fixed retransmission timeouts at the
// recovery package's defaults (IRN's RTO_low, RTO_high), its NAK
// interval, no backoff, and no metrics listener.
func daemonArgs(scheme, ccName string, shift uint8) []string {
	p := recovery.Params{}.WithDefaults()
	args := []string{"--metrics", "", "--scheme", scheme, "--rto", "fixed", "--rto-low", (p.RTOLow << shift).String(),
		"--rto-high", (p.RTOHigh << shift).String(), "--nak-interval", (p.NakInterval << shift).String(), "--rto-backoff=false"}
	if ccName != "" {
		args = append(args, "--cc", ccName)
	}
	return args
}

// proc is a softnic process in a namespace.
type proc struct {
	name   string
	cmd    *exec.Cmd
	out    bytes.Buffer
	exited chan struct{}
	err    error
}

func (t *TestbedRunner) start(name, ns string, args ...string) (*proc, error) {
	p := &proc{name: name, exited: make(chan struct{})}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", ns, t.Softnic}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	return p, nil
}

// ready waits until the process answers softnic stats on socket.
func (t *TestbedRunner) ready(p *proc, socket string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it answered: %v: %s", p.name, p.err, bytes.TrimSpace(p.out.Bytes()))
		default:
		}
		if exec.Command(t.Softnic, "stats", "--socket", socket).Run() == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no answer on %s", p.name, socket)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for the exit.
func (p *proc) stop() error {
	select {
	case <-p.exited:
	default:
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			p.cmd.Process.Kill()
			<-p.exited
			return fmt.Errorf("%s did not exit within 15 s of SIGTERM", p.name)
		}
	}
	if p.err != nil {
		return fmt.Errorf("%s: %v: %s", p.name, p.err, bytes.TrimSpace(p.out.Bytes()))
	}
	return nil
}

func (t *TestbedRunner) macOf(ns, iface string) ([6]byte, error) {
	var mac [6]byte
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/sys/class/net/"+iface+"/address").Output()
	if err != nil {
		return mac, fmt.Errorf("MAC of %s in %s: %w", iface, ns, err)
	}
	hw, err := net.ParseMAC(strings.TrimSpace(string(out)))
	if err != nil || len(hw) != 6 {
		return mac, fmt.Errorf("MAC of %s in %s: %q: %v", iface, ns, out, err)
	}
	copy(mac[:], hw)
	return mac, nil
}

// RunCase runs case c with scheme on the testbed once: softnic switch
// with the case's rules and a trace, the two daemons, the workload, the
// daemons' counters, the switch stopped for its trace. Every process it
// started is stopped when it returns.
func (t *TestbedRunner) RunCase(scheme string, c Case) (*Observation, error) {
	if t.macA == ([6]byte{}) {
		var err error
		if t.macA, err = t.macOf(t.Hosts.Switch, t.Hosts.SwitchA); err != nil {
			return nil, err
		}
		if t.macB, err = t.macOf(t.Hosts.Switch, t.Hosts.SwitchB); err != nil {
			return nil, err
		}
		// softnic switch takes next hops from the kernel's neighbour
		// table and drops what it cannot resolve yet (no_neighbour):
		// fixed entries for the two hosts, so that no run loses its
		// first frames to address resolution.
		for _, h := range []struct {
			host TestbedHost
			port string
		}{{t.Hosts.A, t.Hosts.SwitchA}, {t.Hosts.B, t.Hosts.SwitchB}} {
			mac, err := t.macOf(h.host.NS, h.host.Iface)
			if err != nil {
				return nil, err
			}
			hw := net.HardwareAddr(mac[:]).String()
			if out, err := exec.Command("ip", "-n", t.Hosts.Switch, "neigh", "replace", h.host.IP.String(), "lladdr", hw,
				"dev", h.port, "nud", "permanent").CombinedOutput(); err != nil {
				return nil, fmt.Errorf("ip neigh replace %v: %v: %s", h.host.IP, err, bytes.TrimSpace(out))
			}
		}
	}
	began := time.Now()
	t.seq++
	dir := filepath.Join(t.Dir, strconv.Itoa(t.seq))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	h := t.Hosts
	rules, trace := filepath.Join(dir, "rules.json"), filepath.Join(dir, "trace.jsonl")
	if err := os.WriteFile(rules, []byte(c.Rules(h.A.IP, h.B.IP)), 0o644); err != nil {
		return nil, err
	}
	sockSw, sockA, sockB := filepath.Join(dir, "sw.sock"), filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock")
	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	// Marking and pausing are the rules' alone: 8 packets queue at no
	// port long enough to matter, and an ECN mark of the switch's own
	// would be a second event.
	sw, err := t.start("softnic switch", h.Switch, "switch", "--port", h.SwitchA, "--port", h.SwitchB, "--socket", sockSw,
		"--rules", rules, "--trace", trace, "--ecn", "off", "--pfc", "off")
	if err != nil {
		return nil, err
	}
	procs = append(procs, sw)
	da, err := t.start("daemon a", h.A.NS, append(append([]string{"run", "--iface", h.A.Iface, "--ip", h.A.IP.String(), "--socket", sockA}, daemonArgs(scheme, c.CC, t.TimerShift)...), t.DaemonArgs...)...)
	if err != nil {
		return nil, err
	}
	procs = append(procs, da)
	db, err := t.start("daemon b", h.B.NS, append(append([]string{"run", "--iface", h.B.Iface, "--ip", h.B.IP.String(), "--socket", sockB}, daemonArgs(scheme, c.CC, t.TimerShift)...), t.DaemonArgs...)...)
	if err != nil {
		return nil, err
	}
	procs = append(procs, db)
	for i, s := range []string{sockSw, sockA, sockB} {
		if err := t.ready(procs[i], s); err != nil {
			return nil, err
		}
	}
	tReady := time.Now()
	o, err := t.workload(sockA, sockB, c)
	if err != nil {
		return nil, err
	}
	if out, err := exec.Command(t.Softnic, "stats", "--socket", sockSw).Output(); err == nil {
		o.SwitchDrops = switchDrops(string(out))
	}
	// The trace is written when the switch exits.
	procs = procs[1:]
	tWork := time.Now()
	if err := sw.stop(); err != nil {
		return nil, err
	}
	f, err := os.Open(trace)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if o.Trace, o.Events, err = ReadTrace(f); err != nil {
		return nil, fmt.Errorf("%s: %w", trace, err)
	}
	o.ISN = isnOf(o.Trace, o.Requester)
	o.Report = Analyze(o.Trace, o.Events, Options{})
	if t.Log != nil {
		fmt.Fprintf(t.Log, "  %s %s: %d records, %d events, completed %v in %v (started in %v, workload %v, switch stopped %v)\n", scheme, c.Name,
			len(o.Trace), len(o.Events), o.Completed, o.Elapsed.Round(time.Microsecond), tReady.Sub(began).Round(time.Millisecond),
			tWork.Sub(tReady).Round(time.Millisecond), time.Since(tWork).Round(time.Millisecond))
	}
	return o, nil
}

// side is one host's verbs objects.
type side struct {
	ctx  *verbs.Context
	attr verbs.DeviceAttr
	buf  []byte
	mr   *verbs.MR
	cq   *verbs.CQ
	qp   *verbs.QP
}

func openSide(socket string, size int) (*side, error) {
	s := &side{}
	var err error
	if s.ctx, err = verbs.Dial(socket); err != nil {
		return nil, err
	}
	if s.attr, err = s.ctx.QueryDevice(); err != nil {
		return s, err
	}
	if s.buf, err = s.ctx.AllocBuf(size); err != nil {
		return s, err
	}
	pd, err := s.ctx.AllocPD()
	if err != nil {
		return s, err
	}
	if s.mr, err = pd.RegMR(s.buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead); err != nil {
		return s, err
	}
	if s.cq, err = s.ctx.CreateCQ(16); err != nil {
		return s, err
	}
	s.qp, err = pd.CreateQP(verbs.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: 8, MaxRecvWR: 8})
	return s, err
}

func (s *side) endpoint(psn qp.PSN) cm.Endpoint {
	return cm.Endpoint{QPN: s.qp.QPN(), PSN: psn, GID: s.attr.GID, MAC: s.attr.MAC, RKey: s.mr.RKey, Addr: s.mr.Addr,
		Size: uint64(len(s.buf)), Schemes: []string{s.qp.Scheme()}}
}

func (s *side) stats() (map[string]uint64, error) {
	cs, err := s.ctx.Stats()
	if err != nil {
		return nil, err
	}
	m := make(map[string]uint64, len(cs))
	for _, c := range cs {
		m[c.Name] = c.Value
	}
	return m, nil
}

// workload connects a QP on each daemon, posts the case's one message
// and waits for its completions.
func (t *TestbedRunner) workload(sockA, sockB string, c Case) (*Observation, error) {
	w := c.Workload
	size := w.Packets * qp.MTU1024.Bytes()
	a, err := openSide(sockA, size)
	if a != nil && a.ctx != nil {
		defer a.ctx.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("requester: %w", err)
	}
	b, err := openSide(sockB, size)
	if b != nil && b.ctx != nil {
		defer b.ctx.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("responder: %w", err)
	}
	epA, epB := a.endpoint(cm.RandomPSN()), b.endpoint(cm.RandomPSN())
	// Each sends to the switch's port, its next hop.
	toB, toA := epB, epA
	toB.MAC, toA.MAC = t.macA, t.macB
	timeout := DefaultTimeout + t.TimerShift
	p := verbs.ConnParam{MTU: qp.MTU1024, Timeout: timeout}
	if err := cm.ConnectQP(a.qp, epA, toB, p); err != nil {
		return nil, err
	}
	if err := cm.ConnectQP(b.qp, epB, toA, p); err != nil {
		return nil, err
	}
	src, dst := a, b
	if w.Op == OpRead {
		src, dst = b, a
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x636f6e666f726d))
	for i := range src.buf {
		src.buf[i] = byte(rng.Uint32())
	}
	for i := range dst.buf {
		dst.buf[i] = ^src.buf[i]
	}
	recvs := 0
	if w.Op == OpSend {
		recvs = 1
		rw := verbs.RecvWR{WRID: 100, NumSGE: 1}
		rw.SGL[0] = b.mr.SGE(0, size)
		if err := b.qp.PostRecv(rw); err != nil {
			return nil, err
		}
		// The daemon takes the receive from the shared ring in its
		// own time; a SEND arriving before it would meet no receive
		// (RNR), which the fabric's synchronous post never sees.
		time.Sleep(recvSettle)
	}
	op := map[Op]verbs.WROpcode{OpWrite: verbs.WRRDMAWrite, OpRead: verbs.WRRDMARead, OpSend: verbs.WRSend}[w.Op]
	wr := verbs.SendWR{WRID: 0, Opcode: op, Flags: verbs.SendSignaled, NumSGE: 1, RemoteAddr: b.mr.Addr, RKey: b.mr.RKey}
	wr.SGL[0] = a.mr.SGE(0, size)
	o := &Observation{Requester: a.attr.GID, Responder: b.attr.GID, InOrder: true, AckTimeout: ackTimeout(timeout),
		NakInterval: recovery.DefaultNakInterval << t.TimerShift}
	began := time.Now()
	if err := a.qp.PostSend(wr); err != nil {
		return nil, err
	}
	wcs := make([]verbs.WC, 4)
	sent, received := 0, 0
	for sent < 1 || received < recvs {
		if time.Since(began) > runLimitWall {
			break
		}
		n, err := a.cq.Poll(wcs)
		if err != nil {
			return nil, err
		}
		for _, wc := range wcs[:n] {
			if wc.WRID != uint64(sent) {
				o.InOrder = false
			}
			o.Statuses = append(o.Statuses, wc.Status)
			sent++
		}
		if n, err = b.cq.Poll(wcs); err != nil {
			return nil, err
		}
		for _, wc := range wcs[:n] {
			o.Statuses = append(o.Statuses, wc.Status)
			received++
		}
		if n == 0 {
			time.Sleep(20 * time.Microsecond)
		}
	}
	o.Elapsed = time.Since(began)
	o.Completed = sent == 1 && received == recvs
	o.DataOK = bytes.Equal(src.buf, dst.buf)
	statsA, err := a.stats()
	if err != nil {
		return nil, err
	}
	statsB, err := b.stats()
	if err != nil {
		return nil, err
	}
	if o.ReqCounters, err = CountersFromStats(statsA); err != nil {
		return nil, err
	}
	if o.RespCounters, err = CountersFromStats(statsB); err != nil {
		return nil, err
	}
	return o, nil
}

// FindSoftnic returns the softnic binary: path if set, else softnic
// beside this executable, else on $PATH, else one built from this
// module's checkout into dir (go build; for `go run`).
func FindSoftnic(path, dir string) (string, error) {
	if path != "" {
		return path, nil
	}
	if exe, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), "softnic"); isExecutable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("softnic"); err == nil {
		return p, nil
	}
	out := filepath.Join(dir, "softnic")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if b, err := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/softnic/softnic/cmd/softnic").CombinedOutput(); err != nil {
		return "", fmt.Errorf("no softnic binary (-softnic, beside this program or on $PATH) and go build failed: %v: %s", err, bytes.TrimSpace(b))
	}
	return out, nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// TestbedScript finds scripts/testbed.sh: $SOFTNIC_TESTBED_SCRIPT, else
// in the working directory or a parent of it.
func TestbedScript() (string, error) {
	if p := os.Getenv("SOFTNIC_TESTBED_SCRIPT"); p != "" {
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if p := filepath.Join(dir, "scripts", "testbed.sh"); isExecutable(p) || fileExists(p) {
			return p, nil
		}
		if filepath.Dir(dir) == dir {
			return "", errors.New("scripts/testbed.sh not found from the working directory (run in the checkout, or set SOFTNIC_TESTBED_SCRIPT)")
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// switchDrops are the switch's drops other than the rules': frames it
// could not forward (no route, no neighbour, ...), by counter, the
// non-zero ones.
func switchDrops(stats string) map[string]uint64 {
	m := map[string]uint64{}
	for _, l := range strings.Split(stats, "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		switch f[0] {
		case "malformed", "not_ip", "no_route", "no_neighbour", "ttl_expired", "too_big", "dropped", "tx_ring_full":
			if v, err := strconv.ParseUint(f[1], 10, 64); err == nil && v > 0 {
				m[f[0]] = v
			}
		}
	}
	return m
}
