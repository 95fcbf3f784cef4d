package sweep

import (
	"testing"
	"time"

	"github.com/softnic/softnic/recovery"
)

// TestFasrFig7aServiceTime: on FaSR Fig. 7a's single QP at 1% loss, SRNIC
// loses to IRN only when the NIC spends time per frame. With the service
// time its 1.4 µs bitmap queries idle a pipeline that runs at the line
// rate, and it falls below IRN by more than a tenth; without it, a stall
// only delays the frames behind it and SRNIC stays within 5% of IRN.
func TestFasrFig7aServiceTime(t *testing.T) {
	var srnic, irn FasrFig7cNIC
	for _, n := range FasrFig7aNICs() {
		switch n.Scheme {
		case recovery.SRNIC:
			srnic = n
		case recovery.IRN:
			irn = n
		}
	}
	for _, service := range []bool{true, false} {
		gbps := func(nic FasrFig7cNIC) float64 {
			r, err := RunQPs(FasrFig7aConfig(nic, 0.01, service, 1, time.Millisecond, 5*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			return r.GoodputGbps
		}
		s, i := gbps(srnic), gbps(irn)
		t.Logf("service time %v: srnic %.2f Gb/s, irn %.2f Gb/s (%.3f)", service, s, i, s/i)
		if service && s/i > 0.9 {
			t.Errorf("with the service time srnic moved %.2f Gb/s against irn's %.2f: want below 0.9 of it", s, i)
		}
		if !service && (s/i < 0.95 || s/i > 1.05) {
			t.Errorf("without the service time srnic moved %.2f Gb/s against irn's %.2f: want within 5%%", s, i)
		}
	}
}
