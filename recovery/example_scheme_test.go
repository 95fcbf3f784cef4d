package recovery_test

// A scheme with a knob and a counter of its own, in one file, written
// only against package recovery's exported API (as a scheme outside it
// would be), and the tests that it needs nothing else: its knob is set
// as scheme.knob=value, its counter reaches the NIC's counters, and
// `softnic stats` (Counters.Each) prints it. docs/adding-a-scheme.md
// walks through it.

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/softnic/softnic/dataplane"
	"github.com/softnic/softnic/internal/perftest"
	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/recovery"
)

// exampleSTN is go-back-N that sends the last packet of every message N
// times, Improved go-back-N's ST (send twice) with N a knob.
const exampleSTN = "example-stn"

func init() {
	recovery.Register(exampleSTN, func(p recovery.Params) recovery.Scheme {
		gbn, err := recovery.New(recovery.GBN, p)
		if err != nil {
			panic(err) // New checked p before it called this
		}
		return &stnScheme{Scheme: gbn, copies: stnCopies(p)}
	})
}

// stnCopies is the knob example-stn.copies: how many times the last
// packet of a message goes out.
var stnCopies = recovery.IntKnob(exampleSTN, "copies", 2, 1, 8, "copies of a message's last packet")

// stnScheme is go-back-N's scheme but for its name, its senders and its
// counter.
type stnScheme struct {
	recovery.Scheme
	copies int
	extra  uint64 // copies beyond the first that its senders asked for
}

func (s *stnScheme) Name() string { return exampleSTN }

func (s *stnScheme) NewSender() recovery.Sender {
	return &stnSender{Sender: s.Scheme.NewSender(), s: s}
}

func (s *stnScheme) Counters() []recovery.Counter {
	return []recovery.Counter{{Name: "example_stn_extra_copies", Help: "Copies of messages' last packets sent beyond the first (example-stn).", Value: s.extra}}
}

type stnSender struct {
	recovery.Sender
	s *stnScheme
}

func (x *stnSender) Copies(last bool) int {
	if !last {
		return 1
	}
	x.s.extra += uint64(x.s.copies - 1)
	return x.s.copies
}

// TestExampleSchemeKnob: the knob is set as users write it, and a value
// it does not take is refused before the scheme is built.
func TestExampleSchemeKnob(t *testing.T) {
	var v recovery.KnobValues
	if err := v.Set("example-stn.copies=3"); err != nil {
		t.Fatal(err)
	}
	s, err := recovery.New(exampleSTN, recovery.Params{Knobs: v})
	if err != nil {
		t.Fatal(err)
	}
	snd := s.NewSender()
	if n := snd.Copies(true); n != 3 || snd.Copies(false) != 1 {
		t.Errorf("copies=3: Copies(true) %d", n)
	}
	if s, _ := recovery.New(exampleSTN, recovery.Params{}); s.NewSender().Copies(true) != 2 {
		t.Error("the knob's default is not 2")
	}
	if err := v.Set("example-stn.copies=9"); err == nil || !strings.Contains(err.Error(), "out of range 1 to 8") {
		t.Errorf("copies=9: %v", err)
	}
	if _, err := recovery.New(exampleSTN, recovery.Params{Knobs: recovery.KnobValues{"example-stn.copy": "2"}}); err == nil ||
		!strings.Contains(err.Error(), `scheme example-stn has no knob "copy" (its knobs: copies)`) {
		t.Errorf("a knob it does not have: %v", err)
	}
}

// TestExampleSchemeCounter: the counter is the scheme's, by name, from
// the start; after a run between two NICs it is in the NIC's counters,
// and Each (softnic stats) prints it, with no line of dataplane code
// that names it. The extra copies reach the responder as duplicates.
func TestExampleSchemeCounter(t *testing.T) {
	s, _ := recovery.New(exampleSTN, recovery.Params{})
	if got := s.Counters(); len(got) != 1 || got[0].Name != "example_stn_extra_copies" || got[0].Value != 0 {
		t.Fatalf("a new scheme's counters %+v", got)
	}
	var client, server dataplane.Counters
	const iters = 200
	cfg := perftest.Config{Test: perftest.WriteBW, Sizes: []int{4096}, Iters: iters, MTU: qp.MTU1024, Schemes: []string{exampleSTN}}
	fab := perftest.Fabric{Link: perftest.DefaultLink, Scheme: exampleSTN, Seed: 1,
		SchemeParams: recovery.Params{Knobs: recovery.KnobValues{"example-stn.copies": "3"}}}
	if _, err := perftest.RunEmbedded(context.Background(), cfg, fab, perftest.Hooks{Counters: func(c, s dataplane.Counters) { client, server = c, s }}); err != nil {
		t.Fatal(err)
	}
	extra := client.SchemeCounter("example_stn_extra_copies")
	if extra < 2*iters || extra%2 != 0 || server.DuplicateRequest == 0 || server.DuplicateRequest > extra {
		t.Errorf("%d extra copies of %d messages' last packets, %d duplicates at the responder", extra, iters, server.DuplicateRequest)
	}
	var names []string
	var printed uint64
	client.Each(func(name string, v uint64) {
		names = append(names, name)
		if name == "example_stn_extra_copies" {
			printed = v
		}
	})
	if printed != extra || !slices.Contains(names, "rob_peak") {
		t.Errorf("softnic stats prints example_stn_extra_copies %d, want %d", printed, extra)
	}
	if i := slices.Index(names, "example_stn_extra_copies"); i < 0 || names[i-1] != "rob_peak" {
		t.Errorf("the scheme's counter not in the schemes' place (after rob_peak): %v", names)
	}
	if server.SchemeCounter("example_stn_extra_copies") != 0 || !slices.ContainsFunc(server.SchemeCounters, func(c recovery.Counter) bool { return c.Name == "example_stn_extra_copies" }) {
		t.Errorf("the server's counters %+v: want the counter, 0 (it sent no requests)", server.SchemeCounters)
	}
}
