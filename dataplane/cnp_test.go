package dataplane

import (
	"testing"

	"github.com/softnic/softnic/bth"
	"github.com/softnic/softnic/qp"
)

// TestCNPCounted: a RoCEv2 congestion notification packet (bth.CNP, as a
// DCQCN switch or NIC sends it, with a valid ICRC) to a QP is counted as
// rp_cnp_ignored and changes nothing else: no frame back, no other counter
// (rcvd_pkts aside), the QP's state, context and memory untouched
// (docs/wire.md, "CNP"). With a bad ICRC it is an ICRC error, not a CNP.
func TestCNPCounted(t *testing.T) {
	for _, o := range []starOpts{{off: true}, {off: true, ipv6: true}, {}} {
		b := newStarBench(t, o)
		mem := b.snapshot()
		counts := func() map[string]uint64 {
			m := map[string]uint64{}
			c := b.e.Counters()
			c.Each(func(n string, v uint64) { m[n] = v })
			return m
		}
		before := counts()
		cnp := b.starFrame(bth.CNP, 0, nil, nil)
		f, err := bth.ParseFrame(cnp)
		if err != nil || !f.VerifyICRC() || f.Pkt.Opcode() != bth.CNP {
			t.Fatalf("test CNP: %v", err)
		}
		if got := b.exchange(cnp, cnp); len(got) != 0 {
			t.Fatalf("%d frames back", len(got))
		}
		after := counts()
		for n, v := range after {
			want := before[n]
			switch n {
			case "rp_cnp_ignored", "rcvd_pkts":
				want += 2
			}
			if v != want {
				t.Errorf("%+v: %s %d, want %d", o, n, v, want)
			}
		}
		if _, ok := after["rp_cnp_ignored"]; !ok {
			t.Fatal("no rp_cnp_ignored counter")
		}
		b.untouched(mem)
		if b.q.State() != qp.RTS {
			t.Errorf("QP state %v", b.q.State())
		}

		cnp[len(cnp)-1] ^= 1
		b.exchange(cnp)
		if c := b.e.Counters(); c.RcvdICRCErr != 1 || c.RPCNPIgnored != 2 {
			t.Errorf("%+v: corrupt CNP: rcvd_icrc_err %d, rp_cnp_ignored %d", o, c.RcvdICRCErr, c.RPCNPIgnored)
		}
	}
}
