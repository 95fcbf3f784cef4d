package conform

import (
	"testing"

	"github.com/softnic/softnic/dataplane"
)

// TestCountersFromStats: every counter the checks read is one the NIC
// reports by that name (dataplane.Counters.Each, `softnic stats`), and
// it lands in its field; a missing one is an error, not a 0.
func TestCountersFromStats(t *testing.T) {
	var c dataplane.Counters
	stats := map[string]uint64{}
	i := uint64(1)
	for _, field := range judgedCounters {
		*field(&c) = i
		i++
	}
	c.Each(func(name string, v uint64) { stats[name] = v })
	for name := range judgedCounters {
		if _, ok := stats[name]; !ok {
			t.Errorf("judged counter %s is not one of the NIC's", name)
		}
	}
	got, err := CountersFromStats(stats)
	if err != nil {
		t.Fatal(err)
	}
	for name, field := range judgedCounters {
		if *field(&got) != *field(&c) {
			t.Errorf("%s: got %d, want %d", name, *field(&got), *field(&c))
		}
	}
	delete(stats, "local_ack_timeout_err")
	if _, err := CountersFromStats(stats); err == nil {
		t.Error("no error for a missing local_ack_timeout_err")
	}
}
