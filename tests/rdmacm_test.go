//go:build linux

package tests

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/tests/netns"
)

// The drop-in librdmacm (rdmacm/, docs/rdmacm.md): the exports of
// rdma-core's librdmacm.so.1, and its address calls run by a C program
// over both drop-in libraries between the testbed's softnic daemons.

// systemRdmacm is rdma-core's library, the reference for the exports.
const systemRdmacm = "/usr/lib/x86_64-linux-gnu/librdmacm.so.1"

var (
	rdmacmOnce sync.Once
	rdmacmDir  string
	rdmacmErr  error
)

func needRdmacm(t *testing.T) {
	t.Helper()
	needIbverbs(t)
	netns.RequireFile(t, "/usr/include/rdma/rdma_cma.h", "librdmacm-dev")
	netns.RequireFile(t, systemRdmacm, "librdmacm1")
}

// rdmacmLib builds the drop-in librdmacm once per test process, as make
// rdmacm does, into a directory of its own (the ibverbs tests' programs,
// which also load librdmacm, keep rdma-core's), and returns it.
func rdmacmLib(t *testing.T) string {
	t.Helper()
	ibv := ibverbsLib(t)
	rdmacmOnce.Do(func() {
		rdmacmDir = filepath.Join(binDir, "rdmacm")
		if rdmacmErr = os.MkdirAll(rdmacmDir, 0o755); rdmacmErr != nil {
			return
		}
		root, err := filepath.Abs("..")
		if err != nil {
			rdmacmErr = err
			return
		}
		cmd := exec.Command("gcc", "-shared", "-fPIC", "-O2", "-fstack-protector-strong", "-Wall", "-Werror", "-I"+filepath.Join(root, "ibverbs"),
			"-Wl,-soname,librdmacm.so.1", "-Wl,--version-script="+filepath.Join(root, "rdmacm", "librdmacm.map"),
			"-Wl,--no-undefined", "-o", filepath.Join(rdmacmDir, "librdmacm.so.1"),
			filepath.Join(root, "rdmacm", "cma.c"), filepath.Join(root, "rdmacm", "stubs_gen.c"),
			"-L"+ibv, "-l:libibverbs.so.1")
		if out, err := cmd.CombinedOutput(); err != nil {
			rdmacmErr = fmt.Errorf("building the drop-in librdmacm: %v\n%s", err, out)
		}
	})
	if rdmacmErr != nil {
		t.Fatal(rdmacmErr)
	}
	return rdmacmDir
}

// imports lists a library's undefined dynamic symbols as name@version.
func imports(t *testing.T, path string) []string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ds, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range ds {
		if s.Section == elf.SHN_UNDEF && s.Name != "" {
			out = append(out, s.Name+"@"+s.Version)
		}
	}
	sort.Strings(out)
	return out
}

// TestRdmacmSymbols: the drop-in librdmacm exports every symbol of
// rdma-core's librdmacm.so.1 under the same version node, and every
// node, and nothing else; rdmacm/symbols.txt is that list; it needs
// libibverbs.so.1 (DT_NEEDED, as rdma-core's does), and every symbol it
// imports from the private node SOFTNIC_PRIVATE_1 is one the drop-in
// libibverbs exports there.
func TestRdmacmSymbols(t *testing.T) {
	needRdmacm(t)
	lib := filepath.Join(rdmacmLib(t), "librdmacm.so.1")
	want, wantNodes := exports(t, systemRdmacm)
	got, gotNodes := exports(t, lib)
	if len(want) < 60 {
		t.Fatalf("%s exports only %d symbols: not rdma-core's librdmacm?", systemRdmacm, len(want))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		have := map[string]bool{}
		for _, s := range got {
			have[s] = true
		}
		for _, s := range want {
			if !have[s] {
				t.Errorf("missing export %s", s)
			}
			delete(have, s)
		}
		for s := range have {
			t.Errorf("extra export %s (the version script's local: *)", s)
		}
	}
	if strings.Join(gotNodes, " ") != strings.Join(wantNodes, " ") {
		t.Errorf("version nodes %v, rdma-core's %v", gotNodes, wantNodes)
	}
	t.Logf("%d symbols in version nodes %v, as %s", len(want), wantNodes, systemRdmacm)

	b, err := os.ReadFile("../rdmacm/symbols.txt")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && !strings.HasPrefix(l, "#") {
			listed = append(listed, f[0]+"@@"+f[1])
		}
	}
	sort.Strings(listed)
	if strings.Join(listed, " ") != strings.Join(want, " ") {
		t.Errorf("rdmacm/symbols.txt differs from %s's exports: run go run gen.go in rdmacm/", systemRdmacm)
	}

	f, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	needed, err := f.ImportedLibraries()
	f.Close()
	if err != nil || !contains(needed, "libibverbs.so.1") {
		t.Errorf("DT_NEEDED %v (%v), want libibverbs.so.1", needed, err)
	}
	ibv, _ := exports(t, filepath.Join(ibverbsLib(t), "libibverbs.so.1"))
	have := map[string]bool{}
	for _, s := range ibv {
		have[strings.Replace(s, "@@", "@", 1)] = true
	}
	private := 0
	for _, s := range imports(t, lib) {
		if strings.HasSuffix(s, "@SOFTNIC_PRIVATE_1") || strings.HasPrefix(s, "ibv_") {
			if strings.HasSuffix(s, "@SOFTNIC_PRIVATE_1") {
				private++
			}
			if !have[s] {
				t.Errorf("librdmacm imports %s, which the drop-in libibverbs does not export", s)
			}
		}
	}
	if private == 0 {
		t.Errorf("librdmacm imports nothing from SOFTNIC_PRIVATE_1")
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestRdmacmResolve: a C program over both drop-in libraries, in host
// A's namespace with A's daemon as the device: rdma_getaddrinfo (numeric,
// passive, a host name), rdma_get_devices, an event channel whose fd is
// non-blocking (EAGAIN) and then polled, rdma_resolve_addr to B
// (ADDR_RESOLVED: the device's context and PD on the id, A's address as
// source), rdma_set_option's TOS (and EINVAL for an unknown option) and
// rdma_resolve_route (the path record's GIDs, the kernel's hop limit 64,
// MTU 1024, the TOS as traffic class), rdma_init_qp_attr, rdma_create_qp (INIT, with
// CQs made for it), rdma_connect with 255 bytes of private data
// failing with EINVAL (the library built with the stack protector, as
// Debian builds rdma-core, so an overflow would abort), rdma_connect
// sending its REQ (B runs no daemon: the
// id is destroyed with the REQ outstanding), the same calls in
// synchronous mode, and rdma_resolve_addr
// to an address on A's link that nobody answers: ADDR_ERROR with
// -ETIMEDOUT after its 500 ms timeout, and in synchronous mode -1 with
// ETIMEDOUT, never a hang; and calls softnic does not implement
// (multicast, SRQ, rsockets, riomap's off_t) return -1 with ENOSYS.
func TestRdmacmResolve(t *testing.T) {
	needRdmacm(t)
	tb := requireE2E(t)
	ibv, cm := ibverbsLib(t), rdmacmLib(t)
	prog := filepath.Join(binDir, "rdmacmresolve")
	if out, err := exec.Command("gcc", "-Wall", "-Werror", "-o", prog, "rdmacmresolve/main.c", "-L"+cm, "-L"+ibv,
		"-l:librdmacm.so.1", "-l:libibverbs.so.1", "-Wl,-rpath-link,"+ibv).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	a, _ := newE2EHosts(t, tb)
	startE2EDaemon(t, tb, a, tb.A.IPv4)
	silent := "198.18.0.77" // on A's link (198.18.0.0/24), no host
	args := []string{"netns", "exec", tb.NS(a.name), "env", "LD_LIBRARY_PATH=" + cm + ":" + ibv,
		"SOFTNIC_SOCKET=" + a.socket, prog, tb.B.IPv4.String(), silent}
	p := startChild(t, exec.Command("ip", args...), "")
	out := waitExit(t, p, "rdmacmresolve", time.Minute)
	t.Logf("rdmacmresolve:\n%s", out)
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			lines[k] = strings.TrimSpace(lines[k] + " " + v)
		} else {
			lines[k] = ""
		}
	}
	B, A := tb.B.IPv4.String(), tb.A.IPv4.String()
	want := map[string]string{
		"getaddrinfo":      "dst " + B + " port 7471 ps 0x106 qp_type 2 passive rc 0 src 0.0.0.0 name rc 0 dst 127.0.0.1",
		"nonblocking":      "get rc -1 errno=11",
		"addr":             "poll 1 event RDMA_CM_EVENT_ADDR_RESOLVED status 0 verbs 1 pd 1 port 1 src " + A + " dst " + B + " dst_port 7471 src_port_set 1",
		"route":            "poll 1 event RDMA_CM_EVENT_ROUTE_RESOLVED status 0 paths 1 sgid ::ffff:" + A + " dgid ::ffff:" + B + " hop_limit 64 mtu 3 pkey 0xffff tclass 32",
		"set_option":       "tos rc 0 unknown rc -1 errno=22",
		"drained":          "poll 0",
		"init_qp_attr":     "rc 0 mask 0x39 port 1 pkey_index 0",
		"init_qp_attr_rtr": "rc -1 errno=22",
		"create_qp":        "state 1 port 1 cqs 1",
		"connect_big":      "rc -1 errno=22",
		"connect":          "rc 0 errno=0",
		"sync":             "resolve_addr rc 0 verbs 1 resolve_route rc 0 paths 1",
		"silent":           "resolve_addr rc 0 poll 1 event RDMA_CM_EVENT_ADDR_ERROR status -110",
		"devices":          "1 softnic_" + tb.A.Iface,
		"done":             "",
	}
	for k, w := range want {
		got := lines[k]
		if k == "silent" {
			got = strings.TrimSpace(strings.Split(got, "elapsed_ms")[0])
		}
		if got != w {
			t.Errorf("%s: %q, want %q", k, got, w)
		}
	}
	// The ADDR_ERROR comes after the timeout, not before, and not much
	// later (the library's own 10 s poll would have given up).
	if f := strings.Fields(lines["silent"]); len(f) > 0 {
		ms, _ := strconv.Atoi(f[len(f)-1])
		if ms < 500 || ms > 5000 {
			t.Errorf("ADDR_ERROR after %d ms, want after the 500 ms timeout", ms)
		}
	}
	// The unsupported calls: five of them, each -1 with ENOSYS.
	if u := strings.Fields(lines["unsupported"]); len(u) != 15 {
		t.Errorf("unsupported calls: %q, want five", lines["unsupported"])
	} else {
		for i := 0; i < 15; i += 3 {
			if u[i+1] != "-1" || u[i+2] != "errno=38" {
				t.Errorf("%s: %s %s, want -1 errno=38 (ENOSYS)", u[i], u[i+1], u[i+2])
			}
		}
	}
	if f := strings.Fields(lines["sync_silent"]); len(f) != 5 || f[0] != "rc" || f[1] != "-1" || f[2] != "errno=110" {
		t.Errorf("synchronous resolve to the silent address: %q, want rc -1 errno=110 (ETIMEDOUT)", lines["sync_silent"])
	}
	mustStats(t, a.socket)
	stopE2EDaemon(t, tb, a)
}

// rdmacmProc runs a program in host's namespace over both drop-in
// libraries (librdmacm's directory first).
func rdmacmProc(t *testing.T, tb *netns.Testbed, host, socket string, argv ...string) *childProc {
	t.Helper()
	env := []string{"LD_LIBRARY_PATH=" + rdmacmLib(t) + ":" + ibverbsLib(t), "SOFTNIC_SOCKET=" + socket}
	args := append(append([]string{"netns", "exec", tb.NS(host), "env"}, env...), argv...)
	return startChild(t, exec.Command("ip", args...), "")
}

// waitFor waits until p's output has want (p keeps running); it fails
// the test if p exits first or want does not come within timeout.
func waitFor(t *testing.T, p *childProc, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.out.String(), want) {
		select {
		case <-p.exited:
			if !strings.Contains(p.out.String(), want) {
				t.Fatalf("exited (%v) without %q:\n%s", p.err, want, p.out.String())
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q after %v:\n%s", want, timeout, p.out.String())
		}
	}
}

// rdmacmPair runs server on B, waits for its output to show ready
// (printed before the program's rdma_listen), then client on A; both
// must exit 0 within timeout. Their outputs are logged on failure. A
// client rejected because its REQ came before the server's rdma_listen
// (REJ reason 8, as for a port nobody listens on; its output then has
// refused, in lower case: rdma_client's "connection refused"; "" for
// rping, which hangs instead) is started again, up to 10 times.
func rdmacmPair(t *testing.T, tb *netns.Testbed, a, b *e2eHost, ready, refused string, timeout time.Duration, server, client []string) (string, string) {
	t.Helper()
	srv := rdmacmProc(t, tb, b.name, b.socket, server...)
	waitFor(t, srv, ready, 30*time.Second)
	var cli *childProc
	for try := 0; ; try++ {
		cli = rdmacmProc(t, tb, a.name, a.socket, client...)
		select {
		case <-cli.exited:
		case <-time.After(timeout):
		}
		o := strings.ToLower(cli.out.String())
		if refused == "" || cli.err == nil || try == 10 || !strings.Contains(o, refused) {
			break
		}
		t.Logf("client %s refused, the server not yet listening; again:\n%s", client[0], lastLines(cli.out.String(), 3))
		time.Sleep(100 * time.Millisecond)
	}
	cout := waitExit(t, cli, "client "+strings.Join(client, " "), timeout)
	sout := waitExit(t, srv, "server "+strings.Join(server, " "), 30*time.Second)
	return cout, sout
}

// perftestClosed is perftest's failure in its closing handshake (a SEND
// on its rdma_cm exchange connection after the results are printed).
const perftestClosed = "Failed to close connection between server and client"

// perftestPair is rdmacmPair for perftest -R, which may lose its
// closing handshake under loss as it would on any RC NIC: a side whose
// last exchange SEND reached the peer but whose ACK was lost sees the
// peer, done, disconnect (DREQ) before the resend is acknowledged, and
// that SEND fails (here flushed, IBV_WC_WR_FLUSH_ERR; on Linux, where
// the DREQ leaves the QP alone, the resends meet the peer's QP in ERR
// and end with RETRY_EXC_ERR). lossy accepts exactly that on one side
// when the other exits 0; both sides must have printed their results.
//
// perftest 4.5-0.17's -R server makes a new listening id for the test's
// connection after the two sides exchanged their parameters, and a client
// whose REQ comes first is rejected (REJ reason 8, "RDMA_CM_EVENT_REJECTED;
// error: 8"; newer perftest fixes it), which a loaded machine makes
// likely. The client therefore runs with tests/cmdelay, which waits
// perftestConnectDelay before each rdma_connect (nothing else changes on
// the wire); a pair rejected so all the same is run again, both sides, on
// the next port (-p), up to three times, each logged.
func perftestPair(t *testing.T, tb *netns.Testbed, a, b *e2eHost, lossy bool, server, client []string) (string, string) {
	t.Helper()
	delayed := append([]string{"env", "LD_PRELOAD=" + cmDelayLib(t), fmt.Sprintf("SOFTNIC_CONNECT_DELAY_MS=%d", perftestConnectDelay.Milliseconds())}, client...)
	var srv, cli *childProc
	for attempt := 0; ; attempt++ {
		srv, cli = perftestAttempt(t, tb, a, b, client[0], withPort(server, attempt), withPort(delayed, attempt))
		if attempt == 2 || cli.err == nil || !strings.Contains(cli.out.String(), perftestRejectedEarly) {
			break
		}
		t.Logf("attempt %d: %s's REQ came before the server's second listening id (REJ reason 8); both again on the next port:\n%s",
			attempt+1, client[0], lastLines(cli.out.String(), 4))
	}
	procs := [2]*childProc{cli, srv}
	for i, name := range []string{"client", "server"} {
		p, other := procs[i], procs[1-i]
		out := p.out.String()
		if !strings.Contains(out, "#bytes") {
			t.Errorf("%s %s: no perftest table:\n%s", client[0], name, out)
		}
		switch {
		case p.err == nil && !strings.Contains(out, "Failed"):
		case lossy && p.err != nil && other.err == nil && strings.Contains(out, perftestClosed) &&
			strings.Index(out, perftestClosed) > strings.Index(out, "#bytes"):
			t.Logf("%s %s: its closing handshake was lost to the peer's disconnect (end of run under loss): %s",
				client[0], name, strings.TrimSpace(lastLines(out, 3)))
		default:
			t.Errorf("%s %s: %v, reported a failure:\n%s", client[0], name, p.err, out)
		}
	}
	return cli.out.String(), srv.out.String()
}

// perftestConnectDelay is how long perftestPair's client waits before
// each rdma_connect.
const perftestConnectDelay = 500 * time.Millisecond

// perftestRejectedEarly is perftest's report of REJ reason 8.
const perftestRejectedEarly = "Event: RDMA_CM_EVENT_REJECTED; error: 8."

// perftestAttempt runs a perftest -R server on b and its client on a
// (the program name) to the end.
func perftestAttempt(t *testing.T, tb *netns.Testbed, a, b *e2eHost, name string, server, client []string) (srv, cli *childProc) {
	t.Helper()
	srv = rdmacmProc(t, tb, b.name, b.socket, server...)
	waitFor(t, srv, "Waiting for client to connect", 30*time.Second)
	for try := 0; ; try++ {
		cli = rdmacmProc(t, tb, a.name, a.socket, client...)
		bounded(t, cli, "client "+name, 5*time.Minute)
		if cli.err == nil || try == 10 || !strings.Contains(cli.out.String(), "Unexpected CM event bl blka 8") {
			break
		}
		// REJECTED: the REQ came before the server's rdma_listen.
		t.Logf("client %s rejected, the server not yet listening; again", name)
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Contains(cli.out.String(), perftestRejectedEarly) {
		// The server waits on its second id for a client that gave up.
		srv.cmd.Process.Kill()
		<-srv.exited
		return srv, cli
	}
	bounded(t, srv, "server "+name, 30*time.Second)
	return srv, cli
}

// withPort is argv with its -p argument raised by 100 per attempt.
func withPort(argv []string, attempt int) []string {
	out := slices.Clone(argv)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == "-p" {
			if p, err := strconv.Atoi(out[i+1]); err == nil {
				out[i+1] = strconv.Itoa(p + 100*attempt)
			}
		}
	}
	return out
}

// bounded waits for p to exit, killing it after timeout (a failure).
func bounded(t *testing.T, p *childProc, name string, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("%s still running after %v; killed:\n%s", name, timeout, p.out.String())
	}
}

// TestRdmacmUtils: Debian's unmodified rdmacm-utils and perftest over
// both drop-in libraries, connecting through rdma_cm (REQ, REP, RTU on
// the NICs' QP1) between the testbed's daemons, lossless and with the
// switch losing 1% of frames: rping with data verification (-V) for
// 1000 iterations, ib_write_bw -R and ib_read_bw -R, and rdma_server /
// rdma_client with their inline SENDs from unregistered memory received
// each way; and ib_write_bw without -R (which links librdmacm but
// connects over TCP).
func TestRdmacmUtils(t *testing.T) {
	needRdmacm(t)
	netns.RequireNft(t)
	tb, a, b := ibvTestbed(t, "rping", "stdbuf", "ib_write_bw", "ib_read_bw", "rdma_server", "rdma_client")
	rdmacmLib(t)
	B := b.ip.String()
	t.Cleanup(func() { tb.Loss(0) })
	port := 18900
	for _, loss := range []float64{0, 1} {
		if out, err := tb.Loss(loss); err != nil {
			t.Fatal(err)
		} else if loss > 0 {
			t.Logf("switch: %s", out)
		}
		retx := a.counter(t, "retransmitted_pkts") + b.counter(t, "retransmitted_pkts")
		ran := false // a program ran (-run may pick none)
		t.Run(fmt.Sprintf("loss %v%%", loss), func(t *testing.T) {
			t.Run("rping", func(t *testing.T) {
				ran = true
				port++
				p := fmt.Sprint(port)
				// -d on the server: its "rdma_listen" line comes right
				// before rdma_listen. -V: each side checks the data the
				// other's RDMA READ and WRITE moved, each iteration.
				cout, sout := rdmacmPair(t, tb, a, b, "rdma_listen", "", 5*time.Minute,
					[]string{"stdbuf", "-o0", "rping", "-s", "-d", "-a", B, "-p", p, "-C", "1000", "-V", "-v"},
					[]string{"stdbuf", "-o0", "rping", "-c", "-a", B, "-p", p, "-C", "1000", "-V", "-v"})
				// -v: one "ping data" line per iteration on each side.
				for side, o := range map[string]string{"client": cout, "server": sout} {
					if n := strings.Count(o, "ping data: "); n != 1000 {
						t.Errorf("rping %s: %d ping data lines, want 1000", side, n)
					}
					if strings.Contains(o, "data mismatch") || strings.Contains(o, "error") {
						t.Errorf("rping %s reported an error:\n%s", side, lastLines(o, 20))
					}
				}
				t.Logf("rping client, last: %s", lastLines(cout, 1))
			})
			for _, prog := range []string{"ib_write_bw", "ib_read_bw"} {
				t.Run(prog, func(t *testing.T) {
					ran = true
					port++
					argv := []string{prog, "-R", "-F", "-s", "65536", "-n", "1000", "-p", fmt.Sprint(port)}
					cout, _ := perftestPair(t, tb, a, b, loss > 0, append([]string{"stdbuf", "-o0"}, argv...), append(argv, B))
					t.Logf("%s -R:\n%s", prog, lastLines(cout, 3))
				})
			}
			// rdma_server/rdma_client: rdma_getaddrinfo, rdma_create_ep,
			// connect, accept, one 16-byte SEND each way and disconnect,
			// each side ending with "end 0". Their SENDs are
			// IBV_SEND_INLINE from memory they never registered (the
			// library copies it at post, docs/ibverbs.md), and neither
			// program looks at a completion's status, so "end 0" alone
			// proves nothing: with SOFTNIC_DEBUG the library prints every
			// completion with an error status, and the client must have
			// none: its SEND was acknowledged (the server's receive took
			// it) and its receive took the server's SEND. At 1% loss the
			// server's SEND may be flushed by the client's DREQ after it
			// arrived and its ACK was lost (perftestPair), which the
			// server accepts there, and nothing else. Apart from that
			// diagnostic, the daemons count each SEND received: each
			// side's rdma_recvs beyond its QP1's (gsi_rx_mads: the CM's
			// MADs are UD receives too) must have grown by exactly one.
			t.Run("rdma_server", func(t *testing.T) {
				ran = true
				port++
				p := fmt.Sprint(port)
				rcRecvs := func(h *e2eHost) uint64 { return h.counter(t, "rdma_recvs") - h.counter(t, "gsi_rx_mads") }
				recvA, recvB := rcRecvs(a), rcRecvs(b)
				cout, sout := rdmacmPair(t, tb, a, b, "rdma_server: start", "refused", 2*time.Minute,
					[]string{"SOFTNIC_DEBUG=1", "stdbuf", "-o0", "rdma_server", "-p", p},
					[]string{"SOFTNIC_DEBUG=1", "stdbuf", "-o0", "rdma_client", "-s", B, "-p", p})
				for side, o := range map[string]string{"rdma_client": cout, "rdma_server": sout} {
					if !strings.Contains(o, side+": start") || !strings.Contains(o, side+": end 0") {
						t.Errorf("%s: no start and end 0:\n%s", side, o)
					}
					if strings.Contains(o, "doesn't support IBV_SEND_INLINE") {
						t.Errorf("%s did not send inline:\n%s", side, o)
					}
					for _, l := range strings.Split(o, "\n") {
						if !strings.Contains(l, "completed with status") {
							continue
						}
						if side == "rdma_server" && loss > 0 && strings.Contains(l, "completed with status 5 ") {
							t.Logf("%s: %s (the client's DREQ flushed the server's SEND before its ACK came)", side, l)
							continue
						}
						t.Errorf("%s: %s\n%s", side, l, o)
					}
				}
				// QP1's counters catch up with its last MADs' within a
				// poll round or so.
				var gotA, gotB uint64
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
					gotA, gotB = rcRecvs(a)-recvA, rcRecvs(b)-recvB
					if gotA == 1 && gotB == 1 || time.Now().After(deadline) {
						break
					}
				}
				if gotA != 1 || gotB != 1 {
					t.Errorf("SENDs received: rdma_client's side %d, rdma_server's %d, want 1 each", gotA, gotB)
				}
				t.Logf("rdma_client:\n%s\nrdma_server:\n%s", cout, sout)
			})
		})
		if loss > 0 && ran {
			n := a.counter(t, "retransmitted_pkts") + b.counter(t, "retransmitted_pkts") - retx
			if n == 0 {
				t.Errorf("no retransmissions at %v%% loss", loss)
			}
			t.Logf("%v%% loss: %d packets retransmitted", loss, n)
		}
	}
	tb.Loss(0)

	port++
	argv := []string{"ib_write_bw", "-s", "65536", "-m", "1024", "-n", "200", "-F", "-p", fmt.Sprint(port)}
	s := rdmacmProc(t, tb, b.name, b.socket, argv...)
	waitListen(t, tb, b.name, port, s)
	c := rdmacmProc(t, tb, a.name, a.socket, append(argv, B)...)
	cout := waitExit(t, c, "client ib_write_bw", 3*time.Minute)
	sout := waitExit(t, s, "server ib_write_bw", 30*time.Second)
	for side, o := range map[string]string{"client": cout, "server": sout} {
		if !strings.Contains(o, "#bytes") {
			t.Errorf("ib_write_bw %s: no perftest table:\n%s", side, o)
		}
	}
	t.Logf("ib_write_bw over both drop-in libraries:\n%s", lastLines(cout, 3))
}

// TestRdmacmPeerKilled: an rping client connected through rdma_cm is
// killed (SIGKILL) in the middle of its iterations; its daemon
// disconnects the connection (DREQ), so the server's QP is flushed and
// rping's server sees RDMA_CM_EVENT_DISCONNECTED and exits, and B's
// daemon serves the next connection.
func TestRdmacmPeerKilled(t *testing.T) {
	needRdmacm(t)
	tb, a, b := ibvTestbed(t, "rping", "stdbuf")
	rdmacmLib(t)
	B := b.ip.String()
	srv := rdmacmProc(t, tb, b.name, b.socket, "stdbuf", "-o0", "rping", "-s", "-d", "-a", B, "-p", "18990", "-C", "1000000", "-v")
	waitFor(t, srv, "rdma_listen", 30*time.Second)
	cli := rdmacmProc(t, tb, a.name, a.socket, "stdbuf", "-o0", "rping", "-c", "-a", B, "-p", "18990", "-C", "1000000", "-v")
	deadline := time.Now().Add(time.Minute)
	for strings.Count(cli.out.String(), "ping data: ") < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("client: fewer than 20 iterations after a minute:\n%s\nserver:\n%s", cli.out.String(), lastLines(srv.out.String(), 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cli.cmd.Process.Kill()
	<-cli.exited
	select {
	case <-srv.exited:
	case <-time.After(time.Minute):
		t.Fatalf("rping server still running a minute after its client was killed:\n%s", lastLines(srv.out.String(), 30))
	}
	sout := srv.out.String()
	if !strings.Contains(sout, "RDMA_CM_EVENT_DISCONNECTED") {
		t.Errorf("rping server: no DISCONNECTED after its client was killed:\n%s", lastLines(sout, 30))
	}
	t.Logf("rping server, after its client was killed:\n%s", lastLines(sout, 8))

	// The next client connects and runs.
	srv = rdmacmProc(t, tb, b.name, b.socket, "stdbuf", "-o0", "rping", "-s", "-d", "-a", B, "-p", "18991", "-C", "10", "-V", "-v")
	waitFor(t, srv, "rdma_listen", 30*time.Second)
	cli = rdmacmProc(t, tb, a.name, a.socket, "stdbuf", "-o0", "rping", "-c", "-a", B, "-p", "18991", "-C", "10", "-V", "-v")
	cout := waitExit(t, cli, "rping -c", time.Minute)
	waitExit(t, srv, "rping -s", 30*time.Second)
	if n := strings.Count(cout, "ping data: "); n != 10 {
		t.Errorf("rping client after the killed one: %d iterations, want 10:\n%s", n, cout)
	}
}
