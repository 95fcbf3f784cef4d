package perftest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/softnic/softnic/bth"
)

// TestTeardownWaitsForLastAck: in send_lat and write_lat the server's
// last SEND or WRITE completes only when the client's ACK for it
// arrives. The client has its last message by then and finishes; if it
// destroyed its QP at once and that ACK was lost, the server's
// retransmissions found no QP and the server ended in RETRY_EXC_ERR (1
// run in 617 of a soak with 0.5% loss). The run ends with a barrier the
// server passes only after its send queue drained, as perftest's closing
// handshake does. Here the first ACK for the server's last packet is
// dropped.
func TestTeardownWaitsForLastAck(t *testing.T) {
	for _, cfg := range []Config{
		{Test: SendLat, Sizes: []int{64}, Iters: 20},
		{Test: WriteLat, Sizes: []int{64}, Iters: 20},
	} {
		t.Run(cfg.Test.String(), func(t *testing.T) {
			var last atomic.Int64 // the server's last PSN + 1; 0: not known yet
			var dropped atomic.Bool
			drop := func(frame []byte) bool {
				want := last.Load()
				if want == 0 || dropped.Load() {
					return false
				}
				f, err := bth.ParseFrame(frame)
				if err != nil || f.Pkt.Opcode() != bth.RCAcknowledge || int64(f.Pkt.BTH().PSN())+1 != want {
					return false
				}
				dropped.Store(true)
				return true
			}
			fab := Fabric{Link: Link{Ring: 256, Drop: drop}}
			_, err := RunEmbedded(context.Background(), cfg, fab, Hooks{
				Connected: func(c Connection) {
					// One PSN per message: 64 B fits one packet.
					last.Store(int64(c.Remote[0].PSN.Add(uint32(cfg.Iters-1))) + 1)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if !dropped.Load() {
				t.Fatal("the ACK for the server's last packet never passed: the test dropped nothing")
			}
		})
	}
}
