package wireshark

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/internal/capture"
	"github.com/softnic/softnic/internal/pcap"
	"github.com/softnic/softnic/tests/netns"
)

// frames is every golden vector (bth/testdata) and lossy irn, melo and
// fasr traffic from the embedded fabric.
func frames(t *testing.T) [][]byte {
	raw, err := os.ReadFile("../../bth/testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden []struct {
		Name  string `json:"name"`
		Frame string `json:"frame"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, g := range golden {
		b, err := hex.DecodeString(g.Frame)
		if err != nil {
			t.Fatalf("%s: %v", g.Name, err)
		}
		out = append(out, b)
	}
	for i, scheme := range []string{"irn", "melo", "fasr"} {
		err := capture.LossyTraffic(scheme, uint64(7+i), 0.05, 3, func(a, _ *dataplane.Engine) {
			// A's view: everything it sent and received.
			a.SetCapture(func(_ dataplane.CaptureDir, _ time.Duration, f []byte) { out = append(out, append([]byte(nil), f...)) })
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// DCQCN: ECN-capable frames, some CE-marked on the way, and the CNPs
	// the engine sends for them.
	err = capture.MarkedTraffic("gbn", "dcqcn", 11, 4, 3, func(a, _ *dataplane.Engine) {
		a.SetCapture(func(_ dataplane.CaptureDir, _ time.Duration, f []byte) { out = append(out, append([]byte(nil), f...)) })
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func opcodeOf(t *testing.T, frame []byte) bth.Opcode {
	off, ok := capture.BTHOffset(frame)
	if !ok {
		t.Fatalf("frame without a BTH: %x", frame)
	}
	return bth.Opcode(frame[off])
}

// TestDissector: tshark with softnic.lua decodes every field of every
// extension header of every extension opcode, the ICRC checks out, and
// nothing is malformed or flagged by an expert.
func TestDissector(t *testing.T) {
	bin := netns.RequireTool(t, "tshark")
	fr := frames(t)
	seen := map[bth.Opcode]int{}
	for _, f := range fr {
		seen[opcodeOf(t, f)]++
	}
	for op := 0; op < 256; op++ {
		if Extension(bth.Opcode(op)) && seen[bth.Opcode(op)] == 0 {
			t.Errorf("no frame with opcode %#x (%v) to dissect", op, bth.Opcode(op))
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	file := writePcap(t, "all.pcap", fr)
	lua, _ := filepath.Abs("softnic.lua")
	var all []string
	for _, fs := range Fields {
		all = append(all, fs...)
	}
	args := []string{"-n", "-X", "lua_script:" + lua, "-r", file, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,", "-e", "frame.number", "-e", "_ws.malformed", "-e", "_ws.expert"}
	for _, f := range all {
		args = append(args, "-e", f)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	var rows [][]string
	for _, l := range lines {
		if strings.HasPrefix(l, "Running as user") {
			continue
		}
		rows = append(rows, strings.Split(l, "\t"))
	}
	if len(rows) != len(fr) {
		t.Fatalf("tshark printed %d rows for %d frames:\n%s", len(rows), len(fr), out)
	}
	// Standard frames go to Wireshark's InfiniBand dissector, which has
	// findings of its own on some golden vectors (a TTL of 1, an RPC over
	// RDMA heuristic on random SEND payload): the script must change none.
	base, err := exec.Command(bin, "-n", "-r", file, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,", "-e", "_ws.malformed", "-e", "_ws.expert").Output()
	if err != nil {
		t.Fatalf("tshark without the script: %v", err)
	}
	baseRows := strings.Split(strings.TrimRight(string(base), "\n"), "\n")
	if len(baseRows) != len(fr) {
		t.Fatalf("tshark without the script printed %d rows for %d frames", len(baseRows), len(fr))
	}
	checked := map[bth.Opcode]bool{}
	for i, row := range rows {
		if len(row) != 3+len(all) {
			t.Fatalf("frame %d: %d columns, want %d: %q", i+1, len(row), 3+len(all), row)
		}
		op := opcodeOf(t, fr[i])
		if !Extension(op) {
			if row[3] != "" {
				t.Errorf("frame %d: standard opcode %v decoded by softnic.lua", i+1, op)
			}
			if got, want := row[1]+"\t"+row[2], baseRows[i]; got != want {
				t.Errorf("frame %d (%v): with the script malformed/expert %q, without %q", i+1, op, got, want)
			}
			continue
		}
		if row[1] != "" || row[2] != "" {
			t.Errorf("frame %d (%v): malformed %q, expert %q", i+1, op, row[1], row[2])
		}
		got := map[string]string{}
		for j, f := range all {
			got[f] = row[3+j]
		}
		for _, h := range Headers(op) {
			for _, f := range Fields[h] {
				if got[f] == "" {
					t.Errorf("frame %d (%v): %s not decoded", i+1, op, f)
				}
			}
		}
		if got["softnic.icrc.status"] != "1" {
			t.Errorf("frame %d (%v): ICRC status %q, calculated %s, in the frame %s", i+1, op, got["softnic.icrc.status"], got["softnic.icrc.calculated"], got["softnic.icrc"])
		}
		checked[op] = true
	}
	t.Logf("%d frames, %d extension opcodes decoded field by field", len(fr), len(checked))
	// And the verbose tree shows no error of the script.
	v, err := exec.Command(bin, "-n", "-X", "lua_script:"+lua, "-r", file, "-V").CombinedOutput()
	if err != nil {
		t.Fatalf("tshark -V: %v", err)
	}
	for _, bad := range []string{"Lua Error", "Dissector bug"} {
		if strings.Contains(string(v), bad) {
			i := strings.Index(string(v), bad)
			t.Errorf("tshark -V shows %q: ...%s...", bad, string(v)[max(0, i-400):min(len(v), i+200)])
		}
	}
}

// TestDissectorFlagsBadICRC: a frame whose ICRC is wrong is flagged, so
// the ICRC check above can fail.
func TestDissectorFlagsBadICRC(t *testing.T) {
	bin := netns.RequireTool(t, "tshark")
	raw, err := os.ReadFile("../../bth/testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden []struct {
		Name  string `json:"name"`
		Frame string `json:"frame"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	var frame []byte
	for _, g := range golden {
		if g.Name == "rc_ack_sack_v4" {
			frame, _ = hex.DecodeString(g.Frame)
		}
	}
	frame[len(frame)-1] ^= 0x80
	file := filepath.Join(t.TempDir(), "bad.pcap")
	fh, _ := os.Create(file)
	pw, _ := pcap.NewWriter(fh, 0)
	pw.WritePacket(0, len(frame), frame)
	fh.Close()
	lua, _ := filepath.Abs("softnic.lua")
	out, err := exec.Command(bin, "-n", "-X", "lua_script:"+lua, "-r", file, "-T", "fields", "-e", "softnic.icrc.status", "-e", "_ws.expert").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, "0\t") {
		t.Fatalf("corrupted ICRC: tshark says %q, want status 0 and an expert", got)
	}
}

// TestDissectorCompactValues: on the golden out-of-order vectors the
// dissector reads the PETH's receive WQE SN and packet index, the
// RWSNETH, and a WRITE MIDDLE's or LAST's offset (DMA length - payload)
// where gen_golden.py put them: the 6- and 3-byte headers, which leave
// the payload unaligned, are cut where the bth package cuts them.
func TestDissectorCompactValues(t *testing.T) {
	bin := netns.RequireTool(t, "tshark")
	raw, err := os.ReadFile("../../bth/testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden []struct {
		Name  string `json:"name"`
		Frame string `json:"frame"`
		BTH   struct {
			Opcode int `json:"opcode"`
		} `json:"bth"`
		PETH *struct {
			RecvSN uint32 `json:"recv_sn"`
			Index  uint32 `json:"index"`
		} `json:"peth"`
		RWSN    *uint32                  `json:"rwsn"`
		RETH    *struct{ DMALen uint32 } `json:"reth"`
		Payload string                   `json:"payload"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ooo.pcap")
	fh, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := pcap.NewWriter(fh, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, g := range golden {
		op := bth.Opcode(g.BTH.Opcode)
		if op < bth.RCSendFirstOOO || op > bth.RCWriteOnlyImmOOO {
			continue
		}
		b, _ := hex.DecodeString(g.Frame)
		pw.WritePacket(0, len(b), b)
		var w [4]string
		if g.PETH != nil {
			w[0], w[1] = fmt.Sprintf("0x%06x", g.PETH.RecvSN), fmt.Sprint(g.PETH.Index)
		}
		if g.RWSN != nil {
			w[2] = fmt.Sprintf("0x%06x", *g.RWSN)
		}
		if f := bth.Lookup(op).Flags; f&bth.IsWrite != 0 && f&bth.IsFirst == 0 {
			w[3] = fmt.Sprint(g.RETH.DMALen - uint32(len(g.Payload)/2))
		}
		want = append(want, g.Name+"\t"+strings.Join(w[:], "\t"))
	}
	fh.Close()
	if len(want) < 8 {
		t.Fatalf("%d out-of-order golden vectors", len(want))
	}
	lua, _ := filepath.Abs("softnic.lua")
	out, err := exec.Command(bin, "-n", "-X", "lua_script:"+lua, "-r", file, "-T", "fields", "-E", "separator=/t",
		"-e", "softnic.peth.wqesn", "-e", "softnic.peth.index", "-e", "softnic.rwsn.wqesn", "-e", "softnic.reth.offset").Output()
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if !strings.HasPrefix(l, "Running as user") {
			rows = append(rows, l)
		}
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows for %d frames:\n%s", len(rows), len(want), out)
	}
	for i, w := range want {
		name, fields, _ := strings.Cut(w, "\t")
		if rows[i] != fields {
			t.Errorf("%s: tshark %q, want %q", name, rows[i], fields)
		}
	}
}

// TestDissectorCNP: the CNPs the engine sends for CE-marked frames
// (DCQCN's notification point, docs/cc.md) pass the ICRC check, and
// tshark's own InfiniBand dissector decodes them as CNPs (opcode 0x81,
// the marked QP in DestQP) with nothing malformed; BECN is set (bth: the
// dissector has no field for it).
func TestDissectorCNP(t *testing.T) {
	bin := netns.RequireTool(t, "tshark")
	var cnps [][]byte
	err := capture.MarkedTraffic("gbn", "dcqcn", 11, 4, 3, func(_, b *dataplane.Engine) {
		b.SetCapture(func(dir dataplane.CaptureDir, _ time.Duration, f []byte) {
			if fr, err := bth.ParseFrame(f); dir == dataplane.CaptureTX && err == nil && fr.Pkt.Opcode() == bth.CNP {
				cnps = append(cnps, append([]byte(nil), f...))
			}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cnps) == 0 {
		t.Fatal("no CNP sent for the marked frames")
	}
	for i, f := range cnps {
		fr, err := bth.ParseFrame(f)
		if err != nil || !fr.VerifyICRC() || !fr.Pkt.BTH().BECN() {
			t.Fatalf("CNP %d: parse %v, ICRC %v, BECN %v", i, err, err == nil && fr.VerifyICRC(), err == nil && fr.Pkt.BTH().BECN())
		}
	}
	file := writePcap(t, "cnp.pcap", cnps)
	out, err := exec.Command(bin, "-n", "-r", file, "-T", "fields", "-E", "separator=/t", "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp", "-e", "_ws.malformed").CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	rows := 0
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if strings.HasPrefix(l, "Running as user") {
			continue
		}
		rows++
		f := strings.Split(l, "\t")
		if len(f) != 3 || f[0] != "129" || f[1] == "" || f[2] != "" {
			t.Errorf("tshark decodes a CNP as %q", l)
		}
	}
	if rows != len(cnps) {
		t.Fatalf("tshark printed %d rows for %d CNPs:\n%s", rows, len(cnps), out)
	}
	t.Logf("%d CNPs, ICRC valid, decoded by tshark", len(cnps))
}

// writePcap writes frames, one microsecond apart, to a pcap file named
// name in the test's temporary directory and returns its path.
func writePcap(t *testing.T, name string, frames [][]byte) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	fh, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := pcap.NewWriter(fh, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		if err := pw.WritePacket(time.Duration(i)*time.Microsecond, len(f), f); err != nil {
			t.Fatal(err)
		}
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	return file
}
