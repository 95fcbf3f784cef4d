package recovery

// Counter is one of a scheme's counters on one NIC. The engine adds every
// scheme's counters to its own by name: `softnic stats` prints Name and
// Value, /metrics exports softnic_<Name>_total, a counter, with Help as
// its HELP, and docs/metrics.md has a row for it (cmd/softnic's
// TestMetricsDoc checks). Nothing outside the scheme's file names it.
type Counter struct {
	// Name is lower case, words joined by '_', like the engine's own
	// counters (sr_pool_fallbacks); it counts events, so it has no unit
	// and no _total. Schemes that count the same thing share the name,
	// and the engine sums them.
	Name string
	// Help says what is counted, in one sentence.
	Help  string
	Value uint64
}

// NoStats is embedded by a scheme with neither counters nor shared
// pools.
type NoStats struct{}

// Counters is nil: no counters.
func (NoStats) Counters() []Counter { return nil }

// Pools is nil: no shared pools.
func (NoStats) Pools() []PoolStats { return nil }

// AddCounters adds src to dst by name: a counter dst has already gets
// src's value added, the others are appended in src's order. It returns
// the new dst.
func AddCounters(dst, src []Counter) []Counter {
next:
	for _, c := range src {
		for i := range dst {
			if dst[i].Name == c.Name {
				dst[i].Value += c.Value
				continue next
			}
		}
		dst = append(dst, c)
	}
	return dst
}

// CounterValue is the value of the counter called name in cs, 0 when cs
// has none.
func CounterValue(cs []Counter, name string) uint64 {
	for _, c := range cs {
		if c.Name == name {
			return c.Value
		}
	}
	return 0
}

// AllCounters are the counters of every registered scheme, as one just
// built reports them (every value 0), each name once: schemes in Names'
// order, each scheme's counters in its own. It is what a NIC can report,
// for the tools that list or document counters (cmd/softnic's metric
// tests, docs/metrics.md).
func AllCounters() []Counter {
	var all []Counter
	for _, name := range Names() {
		s, err := New(name, Params{})
		if err != nil {
			panic(err) // every registered scheme builds with the defaults
		}
		all = AddCounters(all, s.Counters())
	}
	return all
}
