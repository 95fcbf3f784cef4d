package dataplane

import (
	"errors"
	"testing"

	"github.com/softnic/softnic/qp"
)

// TestRegMRAccess: RegMR refuses what ibv_reg_mr refuses with EINVAL:
// access bits softnic does not define, and remote write or atomic
// without local write.
func TestRegMRAccess(t *testing.T) {
	sim, err := NewSim(SimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pd := sim.A.AllocPD()
	buf := make([]byte, 64)
	for _, a := range []qp.Access{0xffff, qp.AccessLocalWrite | 1<<4, 1 << 31, qp.AccessRemoteWrite, qp.AccessRemoteAtomic | qp.AccessRemoteRead} {
		if _, err := sim.A.RegMR(pd, buf, 0, a); !errors.Is(err, ErrBadAccess) {
			t.Errorf("access %#x: %v; want ErrBadAccess", uint32(a), err)
		}
	}
	for _, a := range []qp.Access{0, qp.AccessRemoteRead, qp.AccessDefined} {
		m, err := sim.A.RegMR(pd, buf, 0, a)
		if err != nil {
			t.Fatalf("access %#x: %v", uint32(a), err)
		}
		if err := sim.A.DeregMR(m); err != nil {
			t.Fatal(err)
		}
	}
}
