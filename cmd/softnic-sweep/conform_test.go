package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/softnic/softnic/dataplane/inject"
	"github.com/softnic/softnic/internal/conform"
)

func TestConformCmd(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "conform.json")
	if err := sweepCmd([]string{"conform", "-scheme", "gbn", "-case", "write-drop-middle", "-json", out}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res conform.SuiteResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Schemes) != 1 || res.Schemes[0].Scheme != "gbn" || len(res.Schemes[0].Cases) != 1 || res.Passed == 0 {
		t.Errorf("result %+v", res)
	}
	for _, bad := range [][]string{{"conform", "-scheme", "nope"}, {"conform", "-case", "nope"}, {"conform", "extra"}} {
		if st := exitStatus(sweepCmd(bad), os.Stderr); st != 2 {
			t.Errorf("%v: exit %d, want 2", bad, st)
		}
	}
	// A trace file, as the real switch writes it.
	run, err := conform.RunCase(conform.Setup{Seed: 1}, conform.Workload{Op: conform.OpWrite, Packets: 4},
		`{"rules":[{"match":{"kind":"data"},"packet":{"nth":2},"action":"drop"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(dir, "trace.jsonl")
	f, err := os.Create(trace)
	if err != nil {
		t.Fatal(err)
	}
	if err := conform.WriteTrace(f, run.Trace, run.Events); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rep := filepath.Join(dir, "report.json")
	if err := sweepCmd([]string{"conform", "-trace", trace, "-json", rep}); err != nil {
		t.Fatal(err)
	}
	b, err = os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	var r conform.Report
	if err := json.Unmarshal(b, &r); err != nil || len(r.Rows) != 1 || r.Rows[0].Action != inject.ActDrop.String() || r.Rows[0].SignalLatency == nil {
		t.Errorf("trace report %+v: %v", r, err)
	}
}
