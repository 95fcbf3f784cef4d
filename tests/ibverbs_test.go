//go:build linux

package tests

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/tests/netns"
)

// The drop-in libibverbs (ibverbs/, docs/ibverbs.md) under Debian's
// unmodified ibverbs programs: the library must export every symbol and
// version node of rdma-core's, and ibv_rc_pingpong and perftest must run
// between the testbed's two softnic daemons with only LD_LIBRARY_PATH
// and SOFTNIC_SOCKET set.

// systemIbverbs is rdma-core's library, the reference for the exports.
const systemIbverbs = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"

var (
	ibvOnce sync.Once
	ibvDir  string
	ibvErr  error
)

// needIbverbs skips (fails under SOFTNIC_REQUIRE_PRIVILEGED=1) unless
// what the drop-in library and the tests need is installed, naming the
// Debian package of what is missing; programs are the ibverbs programs
// the test runs (netns.Packages has their packages).
func needIbverbs(t *testing.T, programs ...string) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("skipping: the reference library path is Debian's x86_64 one")
	}
	netns.RequireFile(t, "/usr/include/infiniband/verbs.h", "libibverbs-dev") // rdma-core's headers
	netns.RequireFile(t, systemIbverbs, "libibverbs1")
	netns.RequireTools(t, "gcc", "go") // cgo builds the drop-in library
	netns.RequireTools(t, programs...)
}

// ibverbsLib builds the drop-in library once per test process, as make
// ibverbs does, and returns its directory (for LD_LIBRARY_PATH).
func ibverbsLib(t *testing.T) string {
	t.Helper()
	ibvOnce.Do(func() {
		softnicBinary(t) // makes binDir
		ibvDir = filepath.Join(binDir, "lib")
		if ibvErr = os.MkdirAll(ibvDir, 0o755); ibvErr != nil {
			return
		}
		root, err := filepath.Abs("..")
		if err != nil {
			ibvErr = err
			return
		}
		cmd := exec.Command("go", "build", "-tags", "ibverbs", "-buildmode=c-shared",
			"-ldflags", "-extldflags '-Wl,--version-script="+filepath.Join(root, "ibverbs", "libibverbs.map")+"'",
			"-o", filepath.Join(ibvDir, "libibverbs.so.1"), "./ibverbs/")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			ibvErr = fmt.Errorf("building the drop-in libibverbs: %v\n%s", err, out)
		}
	})
	if ibvErr != nil {
		t.Fatal(ibvErr)
	}
	return ibvDir
}

// exports lists a library's defined dynamic symbols as name@version
// (name@@version for the default version) and its version nodes.
func exports(t *testing.T, path string) (syms, nodes []string) {
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
	for _, s := range ds {
		if s.Section == elf.SHN_UNDEF || s.Version == "" {
			continue
		}
		if s.Section == elf.SHN_ABS && s.Name == s.Version {
			nodes = append(nodes, s.Name)
			continue
		}
		at := "@@"
		if s.VersionIndex.IsHidden() {
			at = "@"
		}
		syms = append(syms, s.Name+at+s.Version)
	}
	sort.Strings(syms)
	sort.Strings(nodes)
	return syms, nodes
}

// TestIbverbsSymbols: the drop-in library exports every symbol of
// rdma-core's libibverbs.so.1 under the same version, default or not,
// and every version node, so that programs linked with BIND_NOW and the
// providers that import IBVERBS_PRIVATE_34 load against it; beyond
// those, only the node SOFTNIC_PRIVATE_1 with the snic_cm_* calls of
// the drop-in librdmacm's private interface; and symbols.txt, from
// which stubs_gen.c was generated, is rdma-core's list.
func TestIbverbsSymbols(t *testing.T) {
	needIbverbs(t)
	lib := filepath.Join(ibverbsLib(t), "libibverbs.so.1")
	want, wantNodes := exports(t, systemIbverbs)
	got, gotNodes := exports(t, lib)
	if len(want) < 150 {
		t.Fatalf("%s exports only %d symbols: not rdma-core's libibverbs?", systemIbverbs, len(want))
	}
	have := map[string]bool{}
	for _, s := range got {
		have[s] = true
	}
	for _, s := range want {
		if !have[s] {
			t.Errorf("missing export %s", s)
		}
	}
	haveNode := map[string]bool{}
	for _, n := range gotNodes {
		haveNode[n] = true
	}
	for _, n := range wantNodes {
		if !haveNode[n] {
			t.Errorf("missing version node %s", n)
		}
	}
	// Beyond rdma-core's exports, exactly one node of softnic's own:
	// SOFTNIC_PRIVATE_1, the private interface of the drop-in librdmacm
	// (ibverbs/snic_cm.h), with only its snic_cm_* calls; anything else
	// leaks (the version script's local: *).
	// The node's symbols are the ones ibverbs/gen.go wrote into
	// libibverbs.map, all of them exported.
	wanted := map[string]bool{}
	for _, s := range want {
		wanted[s] = true
	}
	privList := privateSymbols(t)
	privWant := map[string]bool{}
	for _, p := range privList {
		privWant[p+"@@SOFTNIC_PRIVATE_1"] = true
	}
	private := 0
	for _, s := range got {
		switch {
		case wanted[s]:
		case privWant[s]:
			private++
		default:
			t.Errorf("extra export %s (the version script's local: *)", s)
		}
	}
	if private != len(privList) || private == 0 {
		t.Errorf("%d of the %d snic_cm_* symbols of libibverbs.map's SOFTNIC_PRIVATE_1 exported", private, len(privList))
	}
	for _, n := range gotNodes {
		if !contains(wantNodes, n) && n != "SOFTNIC_PRIVATE_1" {
			t.Errorf("extra version node %s", n)
		}
	}
	if !haveNode["SOFTNIC_PRIVATE_1"] || private == 0 {
		t.Errorf("no SOFTNIC_PRIVATE_1 node with the snic_cm_* calls the drop-in librdmacm needs")
	}
	t.Logf("%d symbols in %d version nodes, as %s, and %d in SOFTNIC_PRIVATE_1", len(want), len(wantNodes), systemIbverbs, private)

	// symbols.txt is the generated list; a newer rdma-core needs go
	// generate -tags ibverbs ./ibverbs/.
	b, err := os.ReadFile("../ibverbs/symbols.txt")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 4 && !strings.HasPrefix(l, "#") {
			at := "@@"
			if f[2] == "compat" {
				at = "@"
			}
			listed = append(listed, f[0]+at+f[1])
		}
	}
	sort.Strings(listed)
	if strings.Join(listed, " ") != strings.Join(want, " ") {
		t.Errorf("ibverbs/symbols.txt differs from %s's exports: run go generate -tags ibverbs ./ibverbs/", systemIbverbs)
	}
}

// ibvProc runs an ibverbs program in host's namespace over the daemon at
// socket, with the drop-in library first on the library path.
func ibvProc(t *testing.T, tb *netns.Testbed, host, socket string, argv ...string) *childProc {
	t.Helper()
	env := []string{"LD_LIBRARY_PATH=" + ibverbsLib(t), "SOFTNIC_SOCKET=" + socket}
	if y := os.Getenv("SOFTNIC_POLL_YIELD"); y != "" {
		env = append(env, "SOFTNIC_POLL_YIELD="+y)
	}
	args := append(append([]string{"netns", "exec", tb.NS(host), "env"}, env...), argv...)
	return startChild(t, exec.Command("ip", args...), "")
}

// waitListen waits until a TCP socket listens on port in host's
// namespace (a probe connection would take the server's one accept).
func waitListen(t *testing.T, tb *netns.Testbed, host string, port int, srv *childProc) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := tb.Exec(host, "ss", "-Hltn", fmt.Sprintf("sport = :%d", port))
		if strings.Contains(out, "LISTEN") {
			return
		}
		select {
		case <-srv.exited:
			t.Fatalf("server exited (%v) before listening on %d:\n%s", srv.err, port, srv.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on port %d after 20 s:\n%s", port, srv.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitExit waits for p and wants exit status 0.
func waitExit(t *testing.T, p *childProc, name string, timeout time.Duration) string {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("%s still running after %v; killed:\n%s", name, timeout, p.out.String())
		return p.out.String()
	}
	if p.err != nil {
		t.Errorf("%s: %v, want exit 0:\n%s", name, p.err, p.out.String())
	}
	return p.out.String()
}

// ibvPair runs server on B and client on A (connecting to B's address)
// with the same arguments, and returns both outputs.
func ibvPair(t *testing.T, tb *netns.Testbed, a, b *e2eHost, port int, argv ...string) (client, server string) {
	t.Helper()
	srv := ibvProcOn(t, tb, b, argv...)
	waitListen(t, tb, b.name, port, srv)
	cli := ibvProcOn(t, tb, a, append(argv, b.ip.String())...)
	client = waitExit(t, cli, "client "+argv[0], 3*time.Minute)
	server = waitExit(t, srv, "server "+argv[0], 30*time.Second)
	return client, server
}

func ibvTestbed(t *testing.T, programs ...string) (*netns.Testbed, *e2eHost, *e2eHost) {
	t.Helper()
	needIbverbs(t, programs...)
	tb := requireE2E(t)
	ibverbsLib(t)
	a, b := newE2EHosts(t, tb)
	startE2EDaemon(t, tb, a, tb.A.IPv4)
	startE2EDaemon(t, tb, b, tb.B.IPv4)
	return tb, a, b
}

// TestIbverbsPingpong: ibv_devinfo shows the device, and Debian's
// ibv_rc_pingpong runs between the hosts with completion events (-e) and
// without, checking the data it receives (-c); both sides report their
// bandwidth and exit 0.
func TestIbverbsPingpong(t *testing.T) {
	tb, a, b := ibvTestbed(t, "ibv_rc_pingpong", "ibv_devinfo")
	out, err := tb.Exec(a.name, "env", "LD_LIBRARY_PATH="+ibverbsLib(t), "SOFTNIC_SOCKET="+a.socket, "ibv_devinfo", "-v")
	if err != nil || !strings.Contains(out, "PORT_ACTIVE") || !strings.Contains(out, "Ethernet") {
		t.Fatalf("ibv_devinfo: %v\n%s", err, out)
	}
	t.Logf("ibv_devinfo on A:\n%s", firstLines(out, 6))
	for i, extra := range [][]string{nil, {"-e"}} {
		port := 18515 + i
		argv := append([]string{"ibv_rc_pingpong", "-g", "0", "-p", fmt.Sprint(port), "-n", "1000", "-c"}, extra...)
		cli, srv := ibvPair(t, tb, a, b, port, argv...)
		for side, out := range map[string]string{"client": cli, "server": srv} {
			if !strings.Contains(out, "Mbit/sec") || !strings.Contains(out, "1000 iters in") {
				t.Errorf("%v %s: no bandwidth report:\n%s", extra, side, out)
			}
			// -c: the receiver checks that the sender's pattern landed in
			// its buffer (memory the library shared at ibv_reg_mr).
			if strings.Contains(out, "invalid data") {
				t.Errorf("%v %s: received data differs:\n%s", extra, side, out)
			}
		}
		t.Logf("ibv_rc_pingpong %v, client:\n%s", extra, lastLines(cli, 2))
	}
	if a.counter(t, "sent_pkts") == 0 || b.counter(t, "rcvd_pkts") == 0 {
		t.Errorf("the daemons' counters show no traffic")
	}
}

// privateSymbols lists the node SOFTNIC_PRIVATE_1 of ibverbs/libibverbs.map
// (snic_cm_* only).
func privateSymbols(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../ibverbs/libibverbs.map")
	if err != nil {
		t.Fatal(err)
	}
	_, node, ok := strings.Cut(string(b), "SOFTNIC_PRIVATE_1 {")
	node, _, _ = strings.Cut(node, "}")
	var out []string
	for _, f := range strings.Fields(node) {
		if name, ok := strings.CutSuffix(f, ";"); ok && name != "global:" {
			if !strings.HasPrefix(name, "snic_cm_") {
				t.Errorf("libibverbs.map's SOFTNIC_PRIVATE_1 has %s, not a snic_cm_ call", name)
			}
			out = append(out, name)
		}
	}
	if !ok || len(out) == 0 {
		t.Fatal("ibverbs/libibverbs.map has no SOFTNIC_PRIVATE_1 node: go generate -tags ibverbs ./ibverbs/")
	}
	return out
}

func firstLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[:min(n, len(l))], "\n")
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// perftests are the perftest programs and arguments the test runs: 64
// KiB messages at path MTU 1024 (the bw tests), 8 B (latency), perftest's
// own exchange on its own port.
var perftests = [][]string{
	{"ib_write_bw", "-s", "65536", "-m", "1024", "-n", "2000"},
	{"ib_read_bw", "-s", "65536", "-m", "1024", "-n", "1000"},
	{"ib_send_bw", "-s", "65536", "-m", "1024", "-n", "1000"},
	{"ib_write_lat", "-s", "8", "-m", "1024", "-n", "1000"},
	{"ib_atomic_bw", "-m", "1024", "-n", "1000"},
}

// TestIbverbsPerftest: Debian's perftest programs between the hosts, at
// 0% and at 1% loss on the switch; each side exits 0 and prints
// perftest's table, and the daemons' counters show the traffic (and the
// retransmissions under loss).
func TestIbverbsPerftest(t *testing.T) {
	var progs []string
	for _, p := range perftests {
		progs = append(progs, p[0])
	}
	netns.RequireNft(t)
	tb, a, b := ibvTestbed(t, progs...)
	port := 18600
	for _, loss := range []float64{0, 1} {
		if out, err := tb.Loss(loss); err != nil {
			t.Fatal(err)
		} else if loss > 0 {
			t.Logf("switch: %s", out)
		}
		retx := a.counter(t, "retransmitted_pkts") + b.counter(t, "retransmitted_pkts")
		for _, p := range perftests {
			t.Run(fmt.Sprintf("%s/loss%v", p[0], loss), func(t *testing.T) {
				port++
				argv := append(append([]string{}, p...), "-F", "-p", fmt.Sprint(port))
				cli, srv := ibvPair(t, tb, a, b, port, argv...)
				for side, out := range map[string]string{"client": cli, "server": srv} {
					if !strings.Contains(out, "#bytes") {
						t.Errorf("%s: no perftest table:\n%s", side, out)
					}
				}
				t.Logf("%s\n%s", strings.Join(argv, " "), lastLines(cli, 4))
			})
		}
		if loss > 0 {
			if n := a.counter(t, "retransmitted_pkts") + b.counter(t, "retransmitted_pkts") - retx; n == 0 {
				t.Errorf("no retransmissions at %v%% loss", loss)
			} else {
				t.Logf("%v%% loss: %d packets retransmitted", loss, n)
			}
		}
	}
	tb.Loss(0)
	if a.counter(t, "sent_pkts") == 0 || b.counter(t, "sent_pkts") == 0 {
		t.Errorf("the daemons' counters show no traffic")
	}
}

// TestIbverbsUnsupported: a program that calls verbs softnic does not
// implement (UC QPs, memory windows,
// extended QPs, dmabuf regions) gets NULL or an error with EOPNOTSUPP
// from each, and a Q_Key on an RC QP (a UD attribute) EINVAL, never a
// crash; the same context's supported
// verbs still work, ibv_reg_mr registers malloc'ed memory of 64 KiB and
// 64 MiB twice with its contents intact (the program prints the cost),
// and the daemon stays healthy for the next client.
func TestIbverbsUnsupported(t *testing.T) {
	needIbverbs(t, "ibv_devinfo")
	tb := requireE2E(t)
	lib := ibverbsLib(t)
	prog := filepath.Join(binDir, "ibvunsupported")
	if out, err := exec.Command("gcc", "-o", prog, "ibvunsupported/main.c", "-L"+lib, "-l:libibverbs.so.1").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	a, _ := newE2EHosts(t, tb)
	startE2EDaemon(t, tb, a, tb.A.IPv4)
	p := ibvProc(t, tb, a.name, a.socket, prog)
	out := waitExit(t, p, "ibvunsupported", time.Minute)
	calls := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) == 3 && strings.HasPrefix(f[2], "errno=") {
			calls++
			want := "errno=95" // EOPNOTSUPP
			if f[0] == "ibv_modify_qp(RC,QKEY)" {
				want = "errno=22" // EINVAL: the mask does not fit the QP's type and transition
			}
			if f[1] != "failed" || f[2] != want {
				t.Errorf("%s: %s %s, want failed with %s", f[0], f[1], f[2], want)
			}
		}
	}
	if calls != 5 || !strings.Contains(out, "supported verbs ok") {
		t.Errorf("ibvunsupported: %d unsupported calls reported, want 5, then supported verbs ok:\n%s", calls, out)
	}
	t.Logf("ibvunsupported:\n%s", out)
	mustStats(t, a.socket)
	d := ibvProc(t, tb, a.name, a.socket, "ibv_devinfo")
	if out := waitExit(t, d, "ibv_devinfo", time.Minute); !strings.Contains(out, "PORT_ACTIVE") {
		t.Errorf("ibv_devinfo after the unsupported calls:\n%s", out)
	}
	stopE2EDaemon(t, tb, a)
}

// bwAverage is the BW average column of perftest's (and softnic-bench's)
// row for size.
func bwAverage(t *testing.T, out, size string) float64 {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 4 && f[0] == size {
			var v float64
			if _, err := fmt.Sscan(f[3], &v); err == nil {
				return v
			}
		}
	}
	t.Fatalf("no row for %s bytes:\n%s", size, out)
	return 0
}

// TestIbverbsVsBench measures (it asserts nothing: speed is never
// asserted in tests) Debian's ib_write_bw over the drop-in library next
// to softnic-bench write_bw, same testbed, same daemons, same run,
// interleaved, 64 KiB at MTU 1024 on one QP; docs/results.md quotes it.
// It runs only with SOFTNIC_IBVERBS_COMPARE=1 (a minute of traffic).
func TestIbverbsVsBench(t *testing.T) {
	if os.Getenv("SOFTNIC_IBVERBS_COMPARE") != "1" {
		t.Skip("skipping: a measurement; set SOFTNIC_IBVERBS_COMPARE=1")
	}
	tb, a, b := ibvTestbed(t, "ib_write_bw")
	sb := benchBinary(t)
	const rounds, iters = 7, "5000"
	var perf, own []float64
	port := 18700
	for range rounds {
		port++
		argv := []string{"ib_write_bw", "-s", "65536", "-m", "1024", "-n", iters, "-F", "-p", fmt.Sprint(port)}
		cli, _ := ibvPair(t, tb, a, b, port, argv...)
		perf = append(perf, bwAverage(t, cli, "65536"))

		port++
		p := fmt.Sprint(port)
		srv := startChild(t, exec.Command("ip", "netns", "exec", tb.NS(b.name), sb, "write_bw", "--socket", b.socket, "-s", "65536", "-m", "1024", "-n", iters, "-p", p), "")
		waitListen(t, tb, b.name, port, srv)
		c := startChild(t, exec.Command("ip", "netns", "exec", tb.NS(a.name), sb, "write_bw", "--socket", a.socket, "-s", "65536", "-m", "1024", "-n", iters, "-p", p, b.ip.String()), "")
		out := waitExit(t, c, "softnic-bench client", 3*time.Minute)
		waitExit(t, srv, "softnic-bench server", 30*time.Second)
		own = append(own, bwAverage(t, out, "65536"))
	}
	sort.Float64s(perf)
	sort.Float64s(own)
	t.Logf("ib_write_bw -s 65536 -m 1024 -n %s, MB/s: %v", iters, perf)
	t.Logf("softnic-bench write_bw -s 65536 -m 1024 -n %s, MB/s: %v", iters, own)
	t.Logf("medians: ib_write_bw %.2f MB/s, softnic-bench %.2f MB/s, ratio %.2f", perf[rounds/2], own[rounds/2], perf[rounds/2]/own[rounds/2])
}
