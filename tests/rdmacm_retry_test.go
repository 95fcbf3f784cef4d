//go:build linux

package tests

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRdmacmStaleID: perftest 4.5-0.17's rdma_cm client, when its REQ is
// rejected (reason 8, invalid service ID: nothing listens on the port,
// as when a slow server has not listened yet), destroys its id and event
// channel and retries with the destroyed id (tests/rdmacmretry replays
// it). Against Linux's rxe that retry killed ib_read_bw -R with SIGBUS;
// the drop-in librdmacm must refuse the destroyed id and channel (-1,
// EINVAL) without reading through them, and the program exit 0.
func TestRdmacmStaleID(t *testing.T) {
	needRdmacm(t)
	tb := requireE2E(t)
	ibv, cm := ibverbsLib(t), rdmacmLib(t)
	prog := filepath.Join(binDir, "rdmacmretry")
	if out, err := exec.Command("gcc", "-Wall", "-Werror", "-o", prog, "rdmacmretry/main.c", "-L"+cm, "-L"+ibv,
		"-l:librdmacm.so.1", "-l:libibverbs.so.1", "-Wl,-rpath-link,"+ibv).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	a, b := newE2EHosts(t, tb)
	startE2EDaemon(t, tb, a, tb.A.IPv4)
	startE2EDaemon(t, tb, b, tb.B.IPv4)
	p := rdmacmProc(t, tb, a.name, a.socket, prog, tb.B.IPv4.String(), "7999")
	out := waitExit(t, p, "rdmacmretry", time.Minute)
	t.Logf("rdmacmretry:\n%s", out)
	want := []string{
		"resolve_addr0 rc 0 errno=0",
		"addr event RDMA_CM_EVENT_ADDR_RESOLVED status 0",
		"route event RDMA_CM_EVENT_ROUTE_RESOLVED status 0",
		"create_qp rc 0",
		"connect rc 0",
		"connect event RDMA_CM_EVENT_REJECTED status 8",
		"destroy_id rc 0",
		"resolve_addr1 rc -1 errno=22",
		"resolve_addr2 rc -1 errno=22",
		"destroy_id_again rc -1 errno=22",
		"get_cm_event_destroyed rc -1 errno=22",
		"done",
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), out)
	}
	for i := range want {
		if strings.TrimSpace(got[i]) != want[i] {
			t.Errorf("line %d: %q, want %q", i+1, got[i], want[i])
		}
	}
	stopE2EDaemon(t, tb, a)
	stopE2EDaemon(t, tb, b)
}
