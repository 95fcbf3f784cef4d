package proto

import (
	"errors"
	"fmt"
	"testing"

	"github.com/softnic/softnic/dataplane"
)

// TestErrorRoundTrip: a daemon error reaches the client with its message
// and still matches the sentinel with errors.Is, as in embedded mode.
func TestErrorRoundTrip(t *testing.T) {
	for _, c := range codes {
		in := fmt.Errorf("dataplane: QP 0x10: %w: detail", c.err)
		out := EncodeError(in).Err()
		if !errors.Is(out, c.err) || out.Error() != in.Error() {
			t.Errorf("%s: got %v (is %v)", c.code, out, errors.Is(out, c.err))
		}
	}
	other := EncodeError(errors.New("dataplane: CQ depth must be 1 to 4194304")).Err()
	if other.Error() != "dataplane: CQ depth must be 1 to 4194304" || errors.Is(other, dataplane.ErrBusy) {
		t.Errorf("plain error: %v", other)
	}
}
