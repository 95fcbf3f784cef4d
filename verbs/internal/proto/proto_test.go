package proto

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/softnic/softnic/internal/depcheck"
)

// TestErrorRoundTrip: an error of one of the table's sentinels reaches the
// client with its message and still matches the sentinel with errors.Is;
// another keeps its message and matches none.
func TestErrorRoundTrip(t *testing.T) {
	for _, c := range Base {
		in := fmt.Errorf("verbsd: client 3: %w: detail", c.Err)
		out := Base.Decode(Base.Encode(in))
		if !errors.Is(out, c.Err) || out.Error() != in.Error() {
			t.Errorf("%s: got %v (is %v)", c.Code, out, errors.Is(out, c.Err))
		}
	}
	other := Base.Decode(Base.Encode(errors.New("dataplane: CQ depth must be 1 to 4194304")))
	if other.Error() != "dataplane: CQ depth must be 1 to 4194304" || errors.Is(other, ErrProtocol) {
		t.Errorf("plain error: %v", other)
	}
	if e := Base.Encode(errors.New("x")); e.Code != "error" {
		t.Errorf("plain error's code %q", e.Code)
	}
}

// TestNoEngine: the protocol package does not link the engine (package
// dataplane); the conversions are in package protoconv.
func TestNoEngine(t *testing.T) {
	depcheck.Forbid(t, func(p string) bool {
		return p == "github.com/softnic/softnic/dataplane" || strings.HasPrefix(p, "github.com/softnic/softnic/dataplane/")
	})
}
