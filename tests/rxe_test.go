//go:build linux

package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/tests/netns"
)

// Interop with Linux's software RoCE NIC (rdma_rxe): a QEMU guest made by
// scripts/rxe-vm.sh takes host B's place behind the testbed's switch (B's
// veth bridged to the guest's tap, the guest on B's address), and
// Debian's unmodified programs run between softnic's daemon on A (through
// the drop-in libibverbs, as in ibverbs_test.go) and rxe in the guest,
// each side once the client. docs/interop.md; scripts/rxe-interop.sh runs
// the whole matrix.

// rxeScript is scripts/rxe-vm.sh from the tests directory.
const rxeScript = "../scripts/rxe-vm.sh"

// rxeCache is rxe-vm.sh's cache directory.
func rxeCache() string {
	if c := os.Getenv("SOFTNIC_CACHE"); c != "" {
		return c
	}
	return "/var/cache/softnic-rxe"
}

// rxeVM is a booted guest: its run directory (console log, control
// FIFOs).
type rxeVM struct {
	dir string
}

// vmScript runs rxe-vm.sh with args and returns its combined output.
func vmScript(timeout time.Duration, args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{rxeScript}, args...)...)
	cmd.Env = append(os.Environ(), "SOFTNIC_RXE_TIMEOUT="+strconv.Itoa(int(timeout/time.Second)))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// run runs the shell command cmd in the guest and returns its output; an
// exit status other than 0 is an error.
func (v *rxeVM) run(cmd string, timeout time.Duration) (string, error) {
	return vmScript(timeout, "guest", v.dir, cmd)
}

// needRxe skips (fails under SOFTNIC_REQUIRE_PRIVILEGED=1) unless QEMU
// and the guest's image are here: the cached Debian kernel package and
// the image rxe-vm.sh builds from it.
func needRxe(t *testing.T) {
	t.Helper()
	netns.RequireTools(t, "bash", "qemu-system-x86_64")
	netns.RequireMade(t, "/dev/net/tun", "the kernel's TUN driver, CONFIG_TUN: QEMU's NIC is a tap device")
	c := rxeCache()
	netns.RequireMade(t, filepath.Join(c, "debs", "kernel"), "scripts/rxe-vm.sh fetch: Debian's kernel package, which has rdma_rxe")
	netns.RequireMade(t, filepath.Join(c, "rxe.cpio.gz"), "scripts/rxe-vm.sh image")
}

// bootRxe bridges the guest into B's place on tb and boots it, with
// every device of the path without offloads; the guest is powered off at
// cleanup (testbed down would kill QEMU too: it runs in B's namespace).
func bootRxe(t *testing.T, tb *netns.Testbed) *rxeVM {
	t.Helper()
	for _, args := range [][]string{
		{"net", tb.B.NS, tb.B.Iface, "rxetap"},
		{"offloads", tb.A.NS, tb.A.Iface},
		{"offloads", tb.SwitchA.NS, tb.SwitchA.Iface, tb.SwitchB.Iface},
	} {
		if out, err := vmScript(time.Minute, args...); err != nil {
			t.Fatalf("rxe-vm.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	v := &rxeVM{dir: t.TempDir()}
	startChild(t, exec.Command("ip", "netns", "exec", tb.B.NS, "bash", rxeScript, "run", v.dir), "qemu")
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(v.dir, "console.log")); err == nil {
				t.Logf("guest console, last lines:\n%s", lastLines(string(b), 30))
			}
		}
		if out, err := vmScript(time.Minute, "stop", v.dir); err != nil {
			t.Errorf("rxe-vm.sh stop: %v\n%s", err, out)
		}
	})
	began := time.Now()
	out, err := vmScript(10*time.Minute, "wait", v.dir, "600")
	if err != nil {
		t.Fatalf("the guest did not come up: %v\n%s", err, out)
	}
	t.Logf("guest up in %v: %s", time.Since(began).Round(time.Second), strings.TrimSpace(out))
	return v
}

// guestSlack is how long the host waits for a guest command that gives
// up after d by the guest's clock: a TCG guest keeping time by its TSC,
// calibrated while the host was busy, ran its clock at 0.6 of the
// host's; rxe-vm.sh's guest keeps time by the HPET now, and the slack
// stays: three times d, and a minute more.
func guestSlack(d time.Duration) time.Duration {
	return 3*d + time.Minute
}

// rxeCases are the programs the test runs each way, lossless: small
// enough for a TCG guest (some 15 MB/s of RDMA WRITE), the pingpongs
// with -c so the receiver checks every byte. The UD ones send 1024-byte
// datagrams (softnic's port MTU); ib_send_bw -c UD runs for a time, as
// a sender that outruns the receiver's posted WQEs loses datagrams even
// lossless (docs/ud.md) and a counted run would wait for them.
var rxeCases = [][]string{
	{"ibv_rc_pingpong", "-n", "500", "-c"},
	{"ib_write_bw", "-s", "65536", "-m", "1024", "-n", "300", "-F"},
	{"ib_send_bw", "-s", "65536", "-m", "1024", "-n", "300", "-F"},
	{"ibv_ud_pingpong", "-s", "1024", "-n", "500", "-c"},
	{"ib_send_bw", "-c", "UD", "-s", "1024", "-D", "2", "-F"},
	{"ibv_srq_pingpong", "-n", "200", "-c"},
}

// rxeCaseName names a case's subtests: its program, ib_send_bw -c UD as
// ib_send_bw_UD.
func rxeCaseName(c []string) string {
	for i := range c[:len(c)-1] {
		if c[i] == "-c" && c[i+1] == "UD" {
			return c[0] + "_UD"
		}
	}
	return c[0]
}

// gidArg is the GID index option: softnic's one GID is 0, rxe's RoCEv2
// GID of the IPv4 address 1 (0 is the IPv6 link-local one).
func gidArg(prog string, idx int) []string {
	if strings.HasPrefix(prog, "ibv_") {
		return []string{"-g", strconv.Itoa(idx)}
	}
	return []string{"-x", strconv.Itoa(idx)}
}

// rxeVersions logs what ran: the guest's kernel and packages, the host's
// rdma-core and perftest (under the drop-in library), softnic's commit.
func rxeVersions(t *testing.T, v *rxeVM) {
	t.Helper()
	guest, err := v.run(`cat /etc/rxe-versions; echo "running kernel $(uname -r)"`, time.Minute)
	if err != nil {
		t.Fatalf("guest versions: %v\n%s", err, guest)
	}
	host, _ := exec.Command("dpkg-query", "-W", "-f", "${Package} ${Version}\n", "ibverbs-utils", "rdmacm-utils", "perftest").CombinedOutput()
	kernel, _ := exec.Command("uname", "-r").Output()
	commit, err := exec.Command("git", "-C", "..", "describe", "--always", "--dirty").CombinedOutput()
	if err != nil {
		commit = []byte("unknown (no git)")
	}
	t.Logf("rxe guest:\n%s\nsoftnic side: rdma-core's programs %s over softnic %s's drop-in libraries; host kernel %s (not in the RDMA path)",
		strings.TrimSpace(guest), strings.Join(strings.Split(strings.TrimSpace(string(host)), "\n"), ", "),
		strings.TrimSpace(string(commit)), strings.TrimSpace(string(kernel)))
}

// TestRxeInterop: Debian's ibv_rc_pingpong (-c: byte-checked), ib_write_bw,
// ib_send_bw, and UD's ibv_ud_pingpong (-c) and ib_send_bw -c UD, and
// ibv_srq_pingpong (-c) between softnic's daemon and Linux's rxe,
// lossless, each side once the client; both sides exit 0 and report, and the counters of
// both NICs show the traffic went between them. Then ibv_rc_pingpong at 1%
// loss each way, where both NICs must have recovered losses.
func TestRxeInterop(t *testing.T) {
	// Only with SOFTNIC_RXE=1 (.ci/run sets it, after installing QEMU
	// and building the guest's image): it boots a QEMU guest, a minute
	// of a core under TCG. scripts/rxe-interop.sh runs the whole matrix.
	if os.Getenv("SOFTNIC_RXE") != "1" {
		t.Skip("skipping: set SOFTNIC_RXE=1 to boot Linux's rxe in QEMU (docs/interop.md; .ci/run does)")
	}
	var progs []string
	for _, c := range rxeCases {
		progs = append(progs, c[0])
	}
	needIbverbs(t, progs...)
	needRxe(t)
	tb := requireDaemon(t)
	ibverbsLib(t)
	v := bootRxe(t, tb)
	rxeVersions(t, v)
	a, _ := newE2EHosts(t, tb)
	startE2EDaemon(t, tb, a, tb.A.IPv4)

	rxeCounter := func(t *testing.T, name string) uint64 {
		out, err := v.run("counters", time.Minute)
		if err != nil {
			t.Fatalf("rxe counters: %v\n%s", err, out)
		}
		return statValue(t, out, name)
	}
	port := 18900
	// pair runs c with client's side the client, and wants both sides'
	// reports, no byte wrong, and traffic on both NICs.
	pair := func(t *testing.T, c []string, client string) {
		port++
		rxe0 := rxeCounter(t, "sent_pkts") + rxeCounter(t, "rcvd_pkts")
		snic0 := a.counter(t, "sent_pkts") + a.counter(t, "rcvd_pkts")
		var cli, srv string
		if client == "softnic" {
			cli, srv = rxeServerSoftnicClient(t, tb, v, a, port, c)
		} else {
			cli, srv = softnicServerRxeClient(t, tb, v, a, port, c)
		}
		for side, out := range map[string]string{"client": cli, "server": srv} {
			report := "#bytes"
			if strings.HasPrefix(c[0], "ibv_") {
				report = "iters in"
			}
			if !strings.Contains(out, report) {
				t.Errorf("%s: no report (%q):\n%s", side, report, out)
			}
			if strings.Contains(out, "invalid data") {
				t.Errorf("%s: received data differs (-c):\n%s", side, out)
			}
		}
		// Both NICs took part (a UD bandwidth server only receives).
		if rxeCounter(t, "sent_pkts")+rxeCounter(t, "rcvd_pkts") == rxe0 || a.counter(t, "sent_pkts")+a.counter(t, "rcvd_pkts") == snic0 {
			t.Errorf("the counters show no traffic between rxe and softnic")
		}
		t.Logf("%s, %s the client:\n%s", strings.Join(c, " "), client, lastLines(cli, 3))
	}
	for _, c := range rxeCases {
		for _, client := range []string{"softnic", "rxe"} {
			t.Run(rxeCaseName(c)+"/"+client+"-client", func(t *testing.T) { pair(t, c, client) })
		}
	}

	// rdma_cm: rping -V, ib_write_bw -R, ib_read_bw -R each way, the
	// connections made by softnic's CM and Linux's (rxe_rdmacm_test.go).
	t.Run("rdma_cm", func(t *testing.T) { rxeRdmacm(t, tb, v, a) })

	// At 1% loss on the switch, ibv_rc_pingpong each way (some 4,000
	// data packets and their ACKs per run): both NICs recover what the
	// other's loss cost, softnic resending (retransmitted_pkts) and rxe
	// (completer_retry_err: rxe counts retries, not packets).
	t.Run("loss 1%", func(t *testing.T) {
		netns.RequireNft(t)
		report, err := tb.Loss(1)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(report)
		t.Cleanup(func() {
			if _, err := tb.Loss(0); err != nil {
				t.Error(err)
			}
		})
		retx0, retry0 := a.counter(t, "retransmitted_pkts"), rxeCounter(t, "completer_retry_err")
		for _, client := range []string{"softnic", "rxe"} {
			t.Run("ibv_rc_pingpong/"+client+"-client", func(t *testing.T) { pair(t, rxeCases[0], client) })
		}
		retx, retry := a.counter(t, "retransmitted_pkts")-retx0, rxeCounter(t, "completer_retry_err")-retry0
		if retx == 0 || retry == 0 {
			t.Errorf("at 1%% loss softnic retransmitted %d packets and rxe retried %d times: want both > 0 (was the loss applied? %s)", retx, retry, report)
		} else {
			t.Logf("1%% loss: softnic retransmitted %d packets, rxe retried %d times", retx, retry)
		}
	})
	stopE2EDaemon(t, tb, a)
}

// rxeServerSoftnicClient runs argv's program as the server in the guest
// and as the client on a, and returns the client's and the server's
// output; both must exit 0.
func rxeServerSoftnicClient(t *testing.T, tb *netns.Testbed, v *rxeVM, a *e2eHost, port int, argv []string) (cli, srv string) {
	t.Helper()
	server := append(append(append([]string{}, argv...), gidArg(argv[0], 1)...), "-p", strconv.Itoa(port))
	if out, err := v.run(fmt.Sprintf("bg srv timeout 120 %s; listening %d 60", strings.Join(server, " "), port), 3*time.Minute); err != nil {
		t.Fatalf("guest server %s: %v\n%s", server, err, out)
	}
	client := append(append(append([]string{}, argv...), gidArg(argv[0], 0)...), "-p", strconv.Itoa(port), tb.B.IPv4.String())
	p := ibvProc(t, tb, a.name, a.socket, client...)
	cli = waitExit(t, p, "softnic client "+argv[0], 3*time.Minute)
	// Done when the client is; the guest's seconds can be longer than the
	// host's (see guestSlack).
	srv, err := v.run("fg srv 60", guestSlack(60*time.Second))
	if err != nil {
		t.Errorf("rxe server %s: %v, want exit 0:\n%s", argv[0], err, srv)
	}
	return cli, srv
}

// softnicServerRxeClient is the reverse: the server on a, the client in
// the guest.
func softnicServerRxeClient(t *testing.T, tb *netns.Testbed, v *rxeVM, a *e2eHost, port int, argv []string) (cli, srv string) {
	t.Helper()
	server := append(append(append([]string{}, argv...), gidArg(argv[0], 0)...), "-p", strconv.Itoa(port))
	p := ibvProc(t, tb, a.name, a.socket, server...)
	waitListen(t, tb, a.name, port, p)
	client := append(append(append([]string{}, argv...), gidArg(argv[0], 1)...), "-p", strconv.Itoa(port), tb.A.IPv4.String())
	cli, err := v.run("timeout 120 "+strings.Join(client, " "), guestSlack(120*time.Second))
	if err != nil {
		t.Errorf("rxe client %s: %v, want exit 0:\n%s", argv[0], err, cli)
	}
	srv = waitExit(t, p, "softnic server "+argv[0], time.Minute)
	return cli, srv
}
