package perftest

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// TestRPCLat: rpc_lat on the embedded fabric, ordinary QPs and StaR's
// stateless server, lossless and at 1% loss: 8 connections with one call
// each outstanding, StaR Fig. 5b's call (a 2,800-byte request, a
// 1,400-byte response, path MTU 1024). Every call completes and every
// request and response is checked in full by the side that receives it
// (a corrupted or misplaced message fails the run); the row counts the
// calls, their rate and their latencies. On StaR the server's RECVs and
// SENDs went out as WQEPs, came back as CQEPs, and the server kept no
// context on chip.
func TestRPCLat(t *testing.T) {
	for _, tc := range []struct {
		name string
		star bool
		loss float64
	}{{"rdma", false, 0}, {"rdma-loss", false, 0.01}, {"star", true, 0}, {"star-loss", true, 0.01}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Test: RPCLat, Sizes: []int{DefaultReqSize}, Iters: 240, QPs: 8, MTU: qp.MTU1024, Star: tc.star}
			var server dataplane.Counters
			var reqs, resps uint64
			hooks := Hooks{Counters: func(c, s dataplane.Counters) { server, reqs, resps = s, c.SentPkts, s.SentPkts }}
			rows, err := RunEmbedded(context.Background(), cfg, rpcFabric(tc.star, tc.loss, 7), hooks)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 {
				t.Fatalf("rows %+v", rows)
			}
			r := rows[0]
			if r.Iters != cfg.Iters || r.Bytes != DefaultReqSize || r.RespBytes != DefaultRespSize || r.Lat == nil || !(r.MsgRateMpps > 0) || r.Lat.Min <= 0 || r.Test != "rpc_lat" {
				t.Fatalf("row %+v", r)
			}
			// 3 request packets and 2 response packets per call at MTU
			// 1024: both directions carried every call.
			if reqs < 3*uint64(cfg.Iters) || resps < 2*uint64(cfg.Iters) {
				t.Errorf("client sent %d packets, server %d, for %d calls", reqs, resps, cfg.Iters)
			}
			if tc.star {
				if server.StarWQEPSent < 2*uint64(cfg.Iters) || server.StarCQEPRcvd < 2*uint64(cfg.Iters) {
					t.Errorf("server: %d WQEPs sent, %d CQEPs received, want a RECV and a SEND per call (%d each)", server.StarWQEPSent, server.StarCQEPRcvd, cfg.Iters)
				}
				if server.StarRDPRcvd == 0 || server.StarGDRcvd == 0 || server.QPCResidentBytesPeak != 0 || server.QPCMisses != 0 {
					t.Errorf("server: %d RDPs, %d GDs, resident peak %d bytes, %d misses", server.StarRDPRcvd, server.StarGDRcvd, server.QPCResidentBytesPeak, server.QPCMisses)
				}
			}
			var b bytes.Buffer
			PrintHeader(&b, RPCLat, false)
			PrintRow(&b, r, false)
			if !strings.Contains(b.String(), "calls/sec") || !strings.Contains(b.String(), " 2800    1400        240 ") {
				t.Errorf("table:\n%s", b.String())
			}
			rec := r.Record()
			if rec[0] != "rpc_lat" || rec[5] == "" || rec[9] == "" {
				t.Errorf("CSV record %v: want the call rate and the latencies", rec)
			}
		})
	}
}

// rpcFabric is the embedded fabric of the rpc_lat tests: 10 Gb/s, 2 µs,
// loss in both directions, fixed 10/20 ms timeouts; ordinary QPs run
// IRN, StaR's clients the default.
func rpcFabric(star bool, loss float64, seed uint64) Fabric {
	fab := Fabric{Link: Link{RateBps: 10e9, Delay: 2 * time.Microsecond, Loss: loss}, Seed: seed,
		SchemeParams: recovery.Params{RTOLow: 10 * time.Millisecond, RTOHigh: 20 * time.Millisecond}}
	if !star {
		fab.Scheme = recovery.IRN
	}
	return fab
}

// TestRPCPattern: the payload check catches a flipped byte anywhere, and
// a message of another QP, call or direction.
func TestRPCPattern(t *testing.T) {
	b := make([]byte, 2800)
	rpcPattern(b, 3, 17, 0)
	if at := rpcCheck(b, 3, 17, 0); at != -1 {
		t.Fatalf("own pattern differs at %d", at)
	}
	for _, other := range [][3]int{{4, 17, 0}, {3, 18, 0}, {3, 17, 1}} {
		if rpcCheck(b, other[0], other[1], other[2]) == -1 {
			t.Errorf("pattern of QP 3 call 17 passes as %v", other)
		}
	}
	for _, at := range []int{0, 255, 256, 1399, 2799} {
		b[at] ^= 0x40
		if got := rpcCheck(b, 3, 17, 0); got != at {
			t.Errorf("flipped byte %d: check says %d", at, got)
		}
		b[at] ^= 0x40
	}
}

// TestRPCConfig: rpc_lat takes -q N (the latency tests one QP), one
// RECV per QP and a 1,400-byte response by default; a response size on
// another test, or out of range, is refused.
func TestRPCConfig(t *testing.T) {
	c := Config{Test: RPCLat, Sizes: []int{2800}, Iters: 10, QPs: 5000}
	if err := c.fill(); err != nil || c.RxDepth != 1 || c.RespSize != 1400 || c.TxDepth != 1 {
		t.Fatalf("%v: rx depth %d, response %d, tx depth %d", err, c.RxDepth, c.RespSize, c.TxDepth)
	}
	for _, bad := range []Config{
		{Test: SendLat, Sizes: []int{8}, Iters: 1, RespSize: 8},
		{Test: RPCLat, Sizes: []int{8}, Iters: 1, RespSize: MaxSize + 1},
	} {
		if err := bad.fill(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if ParseTestMust(t, "rpc_lat") != RPCLat || !strings.Contains(strings.Join(Tests(), " "), "rpc_lat") {
		t.Error("rpc_lat is not a test name")
	}
}

func ParseTestMust(t *testing.T, s string) Test {
	t.Helper()
	v, err := ParseTest(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRPCLatCQMod: with CQMod (-Q) rpc_lat signals one SEND in CQMod on
// each QP. Every call still completes with its data checked, ordinary and
// StaR, lossless and at 1% loss, on send queues of CQMod entries: the
// unsignaled SENDs retire with the signaled ones. Lossless on StaR the
// client sends exactly one CQEP per server RECV and one per signaled
// server SEND (30 calls on each of 8 QPs, one in 16 signaled: 8).
func TestRPCLatCQMod(t *testing.T) {
	for _, tc := range []struct {
		name string
		star bool
		loss float64
	}{{"rdma", false, 0}, {"rdma-loss", false, 0.01}, {"star", true, 0}, {"star-loss", true, 0.01}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Test: RPCLat, Sizes: []int{DefaultReqSize}, Iters: 240, QPs: 8, MTU: qp.MTU1024, Star: tc.star, CQMod: 16}
			var server dataplane.Counters
			hooks := Hooks{Counters: func(_, s dataplane.Counters) { server = s }}
			rows, err := RunEmbedded(context.Background(), cfg, rpcFabric(tc.star, tc.loss, 11), hooks)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 || rows[0].Iters != cfg.Iters {
				t.Fatalf("rows %+v", rows)
			}
			if tc.star && tc.loss == 0 {
				if want := uint64(cfg.Iters + cfg.QPs*(cfg.Iters/cfg.QPs/cfg.CQMod)); server.StarCQEPRcvd != want {
					t.Errorf("server received %d CQEPs, want %d (a RECV each call, a signaled SEND in %d)", server.StarCQEPRcvd, want, cfg.CQMod)
				}
			}
		})
	}
	bad := Config{Test: SendLat, Sizes: []int{8}, Iters: 1, CQMod: 4}
	if err := bad.fill(); err == nil || !strings.Contains(err.Error(), "cq-mod") {
		t.Errorf("cq-mod on send_lat: %v", err)
	}
}
