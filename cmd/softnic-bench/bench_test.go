package main

import (
	"strings"
	"testing"
)

// TestPrintCountersReceiveDrops: the receive drops the NIC reports are
// printed, zeros included, and those it does not report are left out.
func TestPrintCountersReceiveDrops(t *testing.T) {
	var out strings.Builder
	p := &printer{out: &out}
	p.printCounters("this NIC during the run", map[string]uint64{
		"sent_pkts": 10, "port_rx_ring_full": 0, "port_rx_fill_ring_empty_descs": 3, "port_rx_dropped": 0,
		"resp_queue_full": 0, "rob_full": 0,
	})
	want := "   receive drops: port_rx_ring_full 0, port_rx_fill_ring_empty_descs 3, port_rx_dropped 0, resp_queue_full 0, rob_full 0\n"
	if got := out.String(); !strings.HasSuffix(got, want) || !strings.HasPrefix(got, " this NIC during the run: sent_pkts 10\n") {
		t.Errorf("printed\n%s\nwant the loss line, then\n%s", got, want)
	}
}
