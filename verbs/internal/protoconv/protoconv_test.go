package protoconv

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/qp"
)

// TestErrorRoundTrip: a daemon error reaches the client with its message
// and still matches the sentinel with errors.Is, as in embedded mode.
func TestErrorRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Codes {
		if seen[c.Code] {
			t.Errorf("code %q twice", c.Code)
		}
		seen[c.Code] = true
		in := fmt.Errorf("dataplane: QP 0x10: %w: detail", c.Err)
		out := DecodeError(EncodeError(in))
		if !errors.Is(out, c.Err) || out.Error() != in.Error() {
			t.Errorf("%s: got %v (is %v)", c.Code, out, errors.Is(out, c.Err))
		}
	}
	other := DecodeError(EncodeError(errors.New("dataplane: CQ depth must be 1 to 4194304")))
	if other.Error() != "dataplane: CQ depth must be 1 to 4194304" || errors.Is(other, dataplane.ErrBusy) {
		t.Errorf("plain error: %v", other)
	}
}

// TestQPAttrRoundTrip: every field survives the wire form.
func TestQPAttrRoundTrip(t *testing.T) {
	in := dataplane.QPAttr{
		State: qp.RTS, CurState: qp.RTR, AccessFlags: qp.AccessRemoteWrite | qp.AccessRemoteRead, PKeyIndex: 2, Port: 1,
		AV: dataplane.AddressVector{DGID: netip.MustParseAddr("2001:db8::7"), DMAC: [6]byte{2, 0, 0, 0, 0, 9},
			TrafficClass: 3, HopLimit: 64, FlowLabel: 0xabcde},
		PathMTU: qp.MTU4096, DestQPN: 0x123, RQPSN: 0x456, SQPSN: 0x789,
		MaxDestRdAtomic: 5, MaxRdAtomic: 6, MinRNRTimer: 12, Timeout: 14, RetryCnt: 7, RNRRetry: 3,
	}
	w := FromQPAttr(&in)
	if out := ToQPAttr(&w); out != in {
		t.Errorf("round trip:\n in %+v\nout %+v", in, out)
	}
}
