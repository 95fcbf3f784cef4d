package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/softnic/softnic/internal/perftest"
)

// perftest's names of the verbs in its JSON "test" key (testsStr).
var jsonVerb = map[perftest.Test]string{
	perftest.WriteBW: "RDMA_Write", perftest.WriteLat: "RDMA_Write",
	perftest.ReadBW: "RDMA_Read", perftest.ReadLat: "RDMA_Read",
	perftest.SendBW: "Send", perftest.SendLat: "Send", perftest.RPCLat: "Send_RPC",
	perftest.AtomicBW: "Atomic_FETCH_AND_ADD",
}

// writeJSON writes r to path as perftest's --out_json does
// (perftest_parameters.c: write_test_info_to_file and
// write_bw_report_to_file or write_report_lat_to_file): an object with
// "test_info", the banner's settings, and "results", the row, under
// perftest's keys and in its number formats. Bandwidths are in the
// table's unit (MiB/s, or Gb/s with --report_gbits) and times in
// microseconds. softnic's own settings are not added: a file reads like
// perftest's to the tools that parse those.
func writeJSON(path string, o *options, cfg perftest.Config, device string, r perftest.Row) error {
	t := o.verbs
	var b strings.Builder
	test := jsonVerb[t] + "_"
	if t.IsLatency() {
		test += "Latency_"
	} else {
		if o.bidir {
			test += "Bidirectional_"
		}
		if o.postList > 1 {
			test += "Post_List_"
		}
		test += "BW_"
	}
	b.WriteString("{\n\"test_info\": {\n")
	fmt.Fprintf(&b, "\"test\": \"%sTest\",\n", test)
	if o.events {
		fmt.Fprintf(&b, "\"Test with events\": \"Using_%s_comp0\",\n", device)
	}
	fmt.Fprintf(&b, "\"Dual_port\": \"OFF\",\n\"Device\": %q,\n", device)
	fmt.Fprintf(&b, "\"Number_of_qps\": %d,\n\"Transport_type\": \"IB\",\n", cfg.QPs)
	fmt.Fprintf(&b, "\"Connection_type\": \"RC\",\n\"Using_SRQ\": \"OFF\",\n")
	fmt.Fprintf(&b, " \"PCIe_relax_order\": \"Unsupported\",\n")
	fmt.Fprintf(&b, "\"ibv_wr_API\": \"OFF\",\n")
	if o.server != "" || o.embedded || o.bidir {
		fmt.Fprintf(&b, "\"TX_depth\": %d,\n", cfg.TxDepth)
	}
	if o.postList > 1 {
		fmt.Fprintf(&b, "\"Post_List\": %d,\n", o.postList)
	}
	if (t == perftest.SendBW || t == perftest.SendLat || t == perftest.RPCLat) && (o.server == "" || o.bidir) {
		fmt.Fprintf(&b, "\"RX_depth\": %d,\n", cfg.RxDepth)
	}
	if !t.IsLatency() {
		// Every WR is signalled: a completion per WR.
		fmt.Fprintf(&b, "\"CQ_Moderation\": %d,\n", 1)
	}
	fmt.Fprintf(&b, "\"Mtu\": %d,\n\"Link_type\": \"Ethernet\",\n", o.mtu)
	if o.set["gid-index"] {
		fmt.Fprintf(&b, "\"GID_index\": %d,\n", o.gidIndex)
	}
	if t == perftest.ReadBW || t == perftest.ReadLat || t == perftest.AtomicBW {
		fmt.Fprintf(&b, "\"Outstand_reads\": %d,\n", 16)
	} else {
		fmt.Fprintf(&b, "\"Max_inline_data\": %d,\n", 0)
	}
	fmt.Fprintf(&b, "\"rdma_cm_QPs\": \"OFF\",\n")
	fmt.Fprintf(&b, "\"Use_ROCm_memory\": \"OFF\",\n\"Use_MUSA_memory\": \"OFF\",\n")
	fmt.Fprintf(&b, "\"Data_ex_method\": \"Ethernet\"\n},\n")

	b.WriteString("\"results\": {\n")
	if l := r.Lat; l != nil {
		us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
		fmt.Fprintf(&b, "\"MsgSize\": %d,\n\"n_iterations\": %d,\n\"t_min\": %.2f,\n\"t_max\": %.2f,\n\"t_typical\": %.2f,\n\"t_avg\": %.2f,\n\"t_stdev\": %.2f,\n\"percentile_99\": %.2f,\n\"percentile_99.9\": %.2f",
			r.Bytes, r.Iters, us(l.Min), us(l.Max), us(l.Typical), us(l.Avg), us(l.Stdev), us(l.P99), us(l.P999))
		if r.RespBytes > 0 {
			// rpc_lat (softnic's): perftest has no such keys.
			fmt.Fprintf(&b, ",\n\"RespSize\": %d,\n\"CallRate\": %.1f", r.RespBytes, r.MsgRateMpps*1e6)
		}
	} else {
		peak, avg := r.PeakGbps, r.AvgGbps
		if !o.gbits {
			peak, avg = peak*1e9/8/(1<<20), avg*1e9/8/(1<<20)
		}
		format := "\"MsgSize\": %d,\n\"n_iterations\": %d,\n\"BW_peak\": %.2f,\n\"BW_average\": %.2f,\n\"MsgRate\": %.6f"
		if o.gbits && avg < 0.1 {
			// perftest's extra accuracy for small Gb/s figures
			format = "\"MsgSize\": %d,\n\"n_iterations\": %d,\n\"BW_peak\": %.6f,\n\"BW_average\": %.6f,\n\"MsgRate\": %.6f"
		}
		fmt.Fprintf(&b, format, r.Bytes, r.Iters, peak, avg, r.MsgRateMpps)
	}
	b.WriteString("\n}\n}\n")
	// perftest creates the file with O_TRUNC and mode 0600.
	return os.WriteFile(path, []byte(b.String()), 0o600)
}
