package conform

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/softnic/softnic/recovery"
)

// TestSuite runs every case for every registered scheme. A failed check
// is a finding about a scheme, not about the suite: the test logs the
// tables and fails only if the suite cannot run, a case does not
// complete with its data intact (no scheme may lose a message), or a
// check that every scheme must pass fails.
func TestSuite(t *testing.T) {
	res, err := RunSuite(SuiteOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := res.WriteTables(&out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if len(res.Schemes) != len(recovery.Names()) {
		t.Errorf("%d schemes judged, %d registered", len(res.Schemes), len(recovery.Names()))
	}
	for _, s := range res.Schemes {
		if len(s.Cases) != len(Cases()) {
			t.Errorf("%s: %d cases of %d", s.Scheme, len(s.Cases), len(Cases()))
		}
		for _, c := range s.Cases {
			for _, ch := range c.Checks {
				switch ch.Name {
				case "completes", "icrc-error", "in-order-only", "signal-psn", "cnp-at-once", "one-cnp":
					if !ch.Pass {
						t.Errorf("%s %s: %s failed: %s", s.Scheme, c.Case, ch.Name, ch.Measured)
					}
				}
			}
		}
	}
	var js bytes.Buffer
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back SuiteResult
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Passed != res.Passed || back.Failed != res.Failed {
		t.Errorf("JSON round trip: %v, %d/%d", err, back.Passed, back.Failed)
	}
}
