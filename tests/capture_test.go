//go:build linux

package tests

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/contrib/wireshark"
	"github.com/softnic/softnic/internal/capture"
	"github.com/softnic/softnic/internal/pcap"
	"github.com/softnic/softnic/tests/netns"
)

// captureProc is a `softnic capture` running against a daemon's socket.
type captureProc struct{ *childProc }

func startCapture(t *testing.T, args ...string) *captureProc {
	t.Helper()
	c := &captureProc{startChild(t, exec.Command(softnicBinary(t), append([]string{"capture"}, args...)...), "")}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(c.out.String(), "listening on") {
		select {
		case <-c.exited:
			t.Fatalf("softnic capture %v exited (%v) before listening:\n%s", args, c.err, c.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("softnic capture %v: not listening after 10 s:\n%s", args, c.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c
}

// wait waits for the capture to stop by itself (its -c count reached).
func (c *captureProc) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-c.exited:
	case <-time.After(timeout):
		c.cmd.Process.Kill()
		<-c.exited
		t.Fatalf("softnic capture did not stop within %v; killed:\n%s", timeout, c.out.String())
	}
	if c.err != nil {
		t.Fatalf("softnic capture: %v\n%s", c.err, c.out.String())
	}
}

// readPcap returns the frames of a pcap file, whole (the capture keeps
// whole frames by default).
func readPcap(t *testing.T, file string) [][]byte {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r, err := pcap.NewReader(fh)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out [][]byte
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: frame %d: %v", file, len(out)+1, err)
		}
		if p.OrigLen != len(p.Data) {
			t.Fatalf("%s: frame %d truncated: %d of %d bytes", file, len(out)+1, len(p.Data), p.OrigLen)
		}
		out = append(out, append([]byte(nil), p.Data...))
	}
}

// dissect runs tshark with softnic.lua on file and checks every frame:
// no malformed packet and no expert finding; every softnic extension
// frame has each field of each of its headers decoded and an ICRC the
// script's own CRC32 accepts. It returns how many frames of each opcode
// the file holds.
func dissect(t *testing.T, bin, file string, frames [][]byte) map[bth.Opcode]int {
	t.Helper()
	lua, err := filepath.Abs("../contrib/wireshark/softnic.lua")
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, fs := range wireshark.Fields {
		all = append(all, fs...)
	}
	sort.Strings(all)
	args := []string{"-n", "-X", "lua_script:" + lua, "-r", file, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,",
		"-e", "frame.number", "-e", "_ws.malformed", "-e", "_ws.expert"}
	for _, f := range all {
		args = append(args, "-e", f)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	var rows [][]string
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if strings.HasPrefix(l, "Running as user") {
			continue
		}
		rows = append(rows, strings.Split(l, "\t"))
	}
	if len(rows) != len(frames) {
		t.Fatalf("tshark printed %d rows for %d frames:\n%s", len(rows), len(frames), out)
	}
	ops := map[bth.Opcode]int{}
	for i, row := range rows {
		if len(row) != 3+len(all) {
			t.Fatalf("frame %d: %d columns, want %d: %q", i+1, len(row), 3+len(all), row)
		}
		off, ok := capture.BTHOffset(frames[i])
		if !ok {
			t.Errorf("frame %d: no BTH: %x", i+1, frames[i])
			continue
		}
		op := bth.Opcode(frames[i][off])
		ops[op]++
		if row[1] != "" || row[2] != "" {
			t.Errorf("frame %d (%v): malformed %q, expert %q", i+1, op, row[1], row[2])
		}
		if !wireshark.Extension(op) {
			continue // Wireshark's own InfiniBand dissector; no finding (above) is all we ask
		}
		got := map[string]string{}
		for j, f := range all {
			got[f] = row[3+j]
		}
		for _, h := range wireshark.Headers(op) {
			for _, f := range wireshark.Fields[h] {
				if f == "softnic.payload" && len(frames[i]) == off+bthPlusICRC(op) {
					continue // a zero-length WRITE or SEND has no payload to show
				}
				if got[f] == "" {
					t.Errorf("frame %d (%v): %s not decoded", i+1, op, f)
				}
			}
		}
		if got["softnic.icrc.status"] != "1" {
			t.Errorf("frame %d (%v): ICRC status %q: calculated %s, in the frame %s", i+1, op, got["softnic.icrc.status"], got["softnic.icrc.calculated"], got["softnic.icrc"])
		}
	}
	v, err := exec.Command(bin, "-n", "-X", "lua_script:"+lua, "-r", file, "-V").CombinedOutput()
	if err != nil {
		t.Fatalf("tshark -V: %v", err)
	}
	for _, bad := range []string{"Lua Error", "Dissector bug", "Malformed"} {
		if i := strings.Index(string(v), bad); i >= 0 {
			t.Errorf("tshark -V shows %q: ...%s...", bad, string(v)[max(0, i-400):min(len(v), i+200)])
		}
	}
	return ops
}

// bthPlusICRC is the length from the BTH to the end of a frame of op
// without payload: its headers and the ICRC (no pad: empty payload).
func bthPlusICRC(op bth.Opcode) int {
	n := 12 + 4
	for _, h := range wireshark.Headers(op) {
		switch h {
		case "reth":
			n += 16
		case "imm":
			n += 4
		case "peth":
			n += 6
		case "rwsn":
			n += 3
		}
	}
	return n
}

func opcodeCounts(ops map[bth.Opcode]int) string {
	var keys []int
	for op := range ops {
		keys = append(keys, int(op))
	}
	sort.Ints(keys)
	var s []string
	for _, k := range keys {
		s = append(s, fmt.Sprintf("%v (%#x) %d", bth.Opcode(k), k, ops[bth.Opcode(k)]))
	}
	return strings.Join(s, ", ")
}

// TestCaptureE2E: `softnic capture -c 100 -w f.pcap` against a daemon
// while softnic-bench write_bw and send_bw run fasr between two daemons
// that each lose a few percent of what they receive. The file holds 100
// whole frames; tshark with contrib/wireshark/softnic.lua finds no
// malformed packet and no expert finding in it, decodes each extension
// header field by field (the RETH on every WRITE, PETH on the SENDs, SACKETH and
// FNACK's when they are among the 100), and the script's own ICRC check
// (its CRC32, not softnic's bth package) accepts every frame. A second
// capture at the same time, --opcode RC_ACKNOWLEDGE_SACK, makes sure
// SACKs, which loss makes fasr send, are dissected too.
func TestCaptureE2E(t *testing.T) {
	ts := netns.RequireTool(t, "tshark")
	tb := requireE2E(t)
	benchBinary(t)
	a, b := newE2EHosts(t, tb)
	startE2EDaemon(t, tb, a, tb.A.IPv4, "--netem", "loss 3% seed 31")
	startE2EDaemon(t, tb, b, tb.B.IPv4, "--netem", "loss 3% seed 32")
	dir := t.TempDir()

	for i, test := range []string{"write_bw", "send_bw"} {
		t.Run(test, func(t *testing.T) {
			all, sacks := filepath.Join(dir, test+".pcap"), filepath.Join(dir, test+"-sack.pcap")
			lost := a.counter(t, "impair_lost") + b.counter(t, "impair_lost")
			bin := benchBinary(t)
			bench := make(chan string, 1)
			benchErr := make(chan string, 1)
			go func() {
				args := []string{test, "-D", "4", "-q", "4", "-s", "4096", "--scheme", "fasr"}
				p := fmt.Sprint(18800 + i)
				srv := exec.Command("ip", append([]string{"netns", "exec", tb.NS(b.name), bin}, append(args, "--socket", b.socket, "-p", p)...)...)
				var srvOut syncBuffer
				srv.Stdout, srv.Stderr = &srvOut, &srvOut
				if err := srv.Start(); err != nil {
					benchErr <- err.Error()
					return
				}
				cli := exec.Command("ip", append([]string{"netns", "exec", tb.NS(a.name), bin}, append(args, "--socket", a.socket, "-p", p, b.ip.String())...)...)
				out, err := cli.CombinedOutput()
				if err != nil {
					srv.Process.Kill()
				}
				serr := srv.Wait()
				if err != nil || serr != nil {
					benchErr <- fmt.Sprintf("%s: client %v, server %v\nclient:\n%s\nserver:\n%s", test, err, serr, out, srvOut.String())
					return
				}
				bench <- string(out)
			}()
			// Start capturing once the bench is moving data, so that the
			// 100 frames are from the lossy steady state.
			time.Sleep(time.Second)
			capAll := startCapture(t, "-i", a.socket, "-c", "100", "-w", all)
			capSack := startCapture(t, "-i", a.socket, "-c", "10", "--opcode", "RC_ACKNOWLEDGE_SACK", "-w", sacks)
			capAll.wait(t, 20*time.Second)
			capSack.wait(t, 20*time.Second)
			select {
			case out := <-bench:
				if !strings.Contains(out, " Recovery scheme : fasr (agreed") {
					t.Errorf("%s did not run fasr:\n%s", test, out)
				}
			case e := <-benchErr:
				t.Fatal(e)
			case <-time.After(60 * time.Second):
				t.Fatalf("%s still running 60 s after the capture", test)
			}
			if got := a.counter(t, "impair_lost") + b.counter(t, "impair_lost"); got == lost {
				t.Errorf("impair_lost did not move: was the loss applied?")
			}
			t.Logf("softnic capture -c 100: %s", strings.TrimSpace(capAll.out.String()))
			t.Logf("softnic capture --opcode RC_ACKNOWLEDGE_SACK -c 10: %s", strings.TrimSpace(capSack.out.String()))

			fr := readPcap(t, all)
			if len(fr) != 100 {
				t.Fatalf("%s: %d frames, want 100", all, len(fr))
			}
			ops := dissect(t, ts, all, fr)
			t.Logf("%s: 100 frames: %s", test, opcodeCounts(ops))
			ooo := 0
			for op, n := range ops {
				if op >= bth.RCSendFirstOOO && op <= bth.RCWriteOnlyImmOOO {
					ooo += n
				}
			}
			if ooo == 0 {
				t.Errorf("no fasr WRITE or SEND (extension opcode) among the 100 frames")
			}
			sf := readPcap(t, sacks)
			if len(sf) != 10 {
				t.Fatalf("%s: %d frames, want 10", sacks, len(sf))
			}
			sops := dissect(t, ts, sacks, sf)
			if sops[bth.RCAcknowledgeSACK] != 10 {
				t.Errorf("--opcode RC_ACKNOWLEDGE_SACK capture: %s", opcodeCounts(sops))
			}
		})
	}
	stopE2EDaemon(t, tb, a)
	stopE2EDaemon(t, tb, b)
}
