//go:build linux

package udpport

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/tests/netns"
)

// TestEngineRDMAWrite runs two softnic engines over UDP ports in the
// testbed's hosts, each in its own adaptive poll loop, and moves RDMA
// WRITEs from A's memory into B's, in both IP families. Every packet's
// ICRC is checked by the receiving engine over the header this port
// rebuilt, so a single field reconstructed wrongly fails the transfer.
func TestEngineRDMAWrite(t *testing.T) {
	tb := netns.NewTestbed(t)
	for _, ipv6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("ipv6=%v", ipv6), func(t *testing.T) {
			pa, pb := openPorts(t, tb, ipv6)
			ea, err := dataplane.NewEngine(dataplane.Config{Addr: pa.LocalAddr()}, pa)
			if err != nil {
				t.Fatal(err)
			}
			eb, err := dataplane.NewEngine(dataplane.Config{MAC: macB, Addr: pb.LocalAddr()}, pb)
			if err != nil {
				t.Fatal(err)
			}
			const size, msg = 2 << 20, 512 << 10
			access := qp.AccessLocalWrite | qp.AccessRemoteWrite
			mk := func(e *dataplane.Engine) (*dataplane.MR, *dataplane.CQ, *dataplane.QP) {
				pd := e.AllocPD()
				mr, err := e.RegMR(pd, make([]byte, size), 0, access)
				if err != nil {
					t.Fatal(err)
				}
				cq, err := e.CreateCQ(64, nil)
				if err != nil {
					t.Fatal(err)
				}
				q, err := e.CreateQP(pd, dataplane.QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 16, MaxRecvWR: 16})
				if err != nil {
					t.Fatal(err)
				}
				return mr, cq, q
			}
			mrA, cqA, qa := mk(ea)
			mrB, _, qb := mk(eb)
			// The MACs do not matter on this port: the kernel routes.
			if err := dataplane.Connect(ea, qa, eb, qb, dataplane.ConnParams{Access: access}); err != nil {
				t.Fatal(err)
			}
			src := mrA.Bytes()
			for i := range src {
				src[i] = byte(i*13 + i>>10)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for _, s := range []struct {
				e *dataplane.Engine
				p *Port
			}{{ea, pa}, {eb, pb}} {
				wg.Go(func() {
					clock := dataplane.NewMonotonicClock()
					s.e.Run(ctx, s.p, clock.Now, dataplane.RunConfig{})
				})
			}
			defer func() {
				cancel()
				wg.Wait()
			}()
			for i := range size / msg {
				wr := qp.SendWR{WRID: uint64(i), Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled, NumSGE: 1,
					RemoteAddr: mrB.Addr + uint64(i*msg), RKey: mrB.RKey}
				wr.SGL[0] = qp.SGE{Addr: mrA.Addr + uint64(i*msg), Length: msg, LKey: mrA.LKey}
				if _, err := ea.PostSend(qa, []qp.SendWR{wr}); err != nil {
					t.Fatal(err)
				}
			}
			wcs := make([]qp.WC, 8)
			deadline := time.Now().Add(20 * time.Second)
			for done := 0; done < size/msg; {
				n, err := ea.PollCQ(cqA, wcs)
				if err != nil {
					t.Fatal(err)
				}
				for _, wc := range wcs[:n] {
					if wc.Status != qp.WCSuccess {
						t.Fatalf("completion %+v", wc)
					}
				}
				done += n
				if time.Now().After(deadline) {
					t.Fatalf("%d writes completed in 20 s; A %+v %+v; B %+v %+v", done, ea.Counters(), pa.Stats(), eb.Counters(), pb.Stats())
				}
				time.Sleep(time.Millisecond)
			}
			if !bytes.Equal(mrB.Bytes(), src) {
				t.Fatal("B's memory differs from A's after the writes")
			}
			if ca, cb := ea.Counters(), eb.Counters(); ca.RcvdICRCErr+cb.RcvdICRCErr+ca.RcvdMalformed+cb.RcvdMalformed != 0 {
				t.Errorf("frames failed the receive checks: A %+v, B %+v", ca, cb)
			}
		})
	}
}
