//go:build linux

package tests

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/tests/netns"
)

// TestIbverbsInline: IBV_SEND_INLINE through the drop-in library
// (docs/ibverbs.md, "Inline data"), by tests/ibvinline, a C program built
// against rdma-core's headers, between the testbed's daemons, lossless
// and with the switch losing 1% of frames (then go-back-N resends read
// the data again, long after the program overwrote its buffers). The
// client sends from stack buffers it never registered and overwrites as
// soon as ibv_post_send returns: 1200 inline SENDs, SENDs with
// immediate, RDMA WRITEs and WRITEs with immediate over RC through a
// send queue of 8, one in four signaled, in lists of 1 to 3; the server
// checks each receive and each WRITE byte for byte. Also: max_inline_data
// above 256 refused at create (EINVAL), what a QP asked for rounded up
// and reported by create and query, an inline SEND or WRITE longer than
// that refused at post (EINVAL, bad_wr naming it, the one before it in
// the list posted), an RDMA READ with the flag reading as without, and,
// lossless, 64 inline UD SENDs.
func TestIbverbsInline(t *testing.T) {
	netns.RequireNft(t)
	tb, a, b := ibvTestbed(t)
	lib := ibverbsLib(t)
	prog := filepath.Join(binDir, "ibvinline")
	if out, err := exec.Command("gcc", "-Wall", "-Werror", "-o", prog, "ibvinline/main.c", "-L"+lib, "-l:libibverbs.so.1").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	t.Cleanup(func() { tb.Loss(0) })
	for _, loss := range []float64{0, 1} {
		t.Run(fmt.Sprintf("loss %v%%", loss), func(t *testing.T) {
			if out, err := tb.Loss(loss); err != nil {
				t.Fatal(err)
			} else if loss > 0 {
				t.Logf("switch: %s", out)
			}
			mode := "all"
			if loss > 0 {
				mode = "rc" // UD does not resend what the switch drops
			}
			retx := a.counter(t, "retransmitted_pkts")
			dir := t.TempDir()
			srv := ibvProc(t, tb, b.name, b.socket, prog, "server", dir, mode)
			cli := ibvProc(t, tb, a.name, a.socket, prog, "client", dir, mode)
			cout := waitExit(t, cli, "ibvinline client", 3*time.Minute)
			sout := waitExit(t, srv, "ibvinline server", time.Minute)
			cwant := []string{"max_inline_data 257 refused, 256 taken ok", "max_inline_data ok: asked 100, reported 128",
				"rc inline posts ok: 1200 work requests", "inline write longer than max_inline_data refused ok: EINVAL",
				"inline send longer than max_inline_data refused ok: EINVAL, bad_wr the second of 2",
				"read with IBV_SEND_INLINE ok", "ibvinline client ok"}
			swant := []string{"rc receives ok: 858, byte-exact", "rc writes ok: 400 and one of max_inline_data (128 bytes), byte-exact",
				"ibvinline server ok"}
			if mode == "all" {
				cwant = append(cwant, "ud inline posts ok: 64 datagrams")
				swant = append(swant, "ud receives ok: 64, byte-exact")
			}
			for side, c := range map[string]struct {
				out  string
				want []string
			}{"client": {cout, cwant}, "server": {sout, swant}} {
				for _, w := range c.want {
					if !strings.Contains(c.out, w) {
						t.Errorf("%s: no %q in:\n%s", side, w, c.out)
					}
				}
			}
			n := a.counter(t, "retransmitted_pkts") - retx
			if loss > 0 && n == 0 {
				t.Errorf("no retransmissions at %v%% loss", loss)
			}
			t.Logf("client:\n%s\nserver:\n%s\nA retransmitted %d packets", cout, sout, n)
		})
	}
}
