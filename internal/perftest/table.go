package perftest

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// Row is one line of a perftest table and one CSV record: a bandwidth row
// (Lat nil) or a latency row.
type Row struct {
	Test        string
	Bytes       int
	Iters       int
	PeakGbps    float64
	AvgGbps     float64
	MsgRateMpps float64
	Lat         *LatStats
	// RespBytes is an rpc_lat row's response size; its Bytes is the
	// request's, MsgRateMpps the calls per second over all QPs, in
	// millions, and Lat the calls' round trips.
	RespBytes int     `json:",omitempty"`
	Scheme    string  // the recovery scheme the two sides agreed on
	LossPct   float64 // configured loss, percent (embedded fabric)
	// NoPeak: BW peak was not measured (timed and infinite runs, more
	// than MaxPeakIters iterations, -N), as perftest skips it; the table
	// shows 0 and the CSV leaves the column empty.
	NoPeak bool `json:",omitempty"`
	// Both, in a bidirectional run, holds each side's own row; the row's
	// columns add the two, as perftest's do.
	Both *BothRows `json:",omitempty"`
}

// BothRows are the two sides' measurements of a bidirectional run.
type BothRows struct {
	Local, Remote Row // as seen from the side that prints them
}

const tableRule = "---------------------------------------------------------------------------------------"

// PrintRule prints perftest's dashed separator.
func PrintRule(w io.Writer) { fmt.Fprintln(w, tableRule) }

// PrintLatHeader prints perftest's latency table header (ib_write_lat).
func PrintLatHeader(w io.Writer) {
	fmt.Fprintln(w, tableRule)
	fmt.Fprintln(w, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ")
}

// PrintRPCHeader prints rpc_lat's table header: perftest's latency
// columns after the request and response sizes, the calls and their rate.
func PrintRPCHeader(w io.Writer) {
	fmt.Fprintln(w, tableRule)
	fmt.Fprintln(w, " #bytes #resp_bytes #calls     calls/sec    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ")
}

// PrintHeader prints the header for the kind of rows test produces.
func PrintHeader(w io.Writer, t Test, gbits bool) {
	if t == RPCLat {
		PrintRPCHeader(w)
		return
	}
	if t.IsLatency() {
		PrintLatHeader(w)
	} else {
		PrintBWHeader(w, gbits)
	}
}

// PrintRow prints r in perftest's layout for its kind.
func PrintRow(w io.Writer, r Row, gbits bool) {
	if r.Lat == nil {
		printBW(w, r.Bytes, r.Iters, r.PeakGbps, r.AvgGbps, r.MsgRateMpps, gbits)
		return
	}
	l := r.Lat
	if r.RespBytes > 0 {
		fmt.Fprintf(w, " %-7d %-11d %-10d %-10.0f   %-7.2f        %-7.2f      %-7.2f          %-7.2f        %-7.2f         %-7.2f                %-7.2f\n",
			r.Bytes, r.RespBytes, r.Iters, r.MsgRateMpps*1e6, usec(l.Min), usec(l.Max), usec(l.Typical), usec(l.Avg), usec(l.Stdev), usec(l.P99), usec(l.P999))
		return
	}
	fmt.Fprintf(w, " %-7d %-10d       %-7.2f        %-7.2f      %-7.2f          %-7.2f        %-7.2f         %-7.2f                %-7.2f\n",
		r.Bytes, r.Iters, usec(l.Min), usec(l.Max), usec(l.Typical), usec(l.Avg), usec(l.Stdev), usec(l.P99), usec(l.P999))
}

func usec(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// printBW prints one bandwidth row; perftest's MiB/sec is 2^20 bytes per
// second.
func printBW(w io.Writer, bytes, iters int, peakGbps, avgGbps, msgRateMpps float64, gbits bool) {
	if !gbits {
		peakGbps, avgGbps = peakGbps*1e9/8/(1<<20), avgGbps*1e9/8/(1<<20)
	}
	fmt.Fprintf(w, " %-10d %-10d       %-7.2f            %-7.2f            %-7.6f\n", bytes, iters, peakGbps, avgGbps, msgRateMpps)
}

// CSVHeader is the first record of a CSV file. Bandwidths are in Gb/s
// whatever the table shows (so files of different runs can be merged),
// latencies in microseconds, loss in percent; columns that do not apply to
// a row's test are empty. An rpc_lat row has both: msg_rate is its
// million calls per second, the latency columns its calls' round trips
// (its response size is not a column: it is the run's --response-size).
var CSVHeader = []string{"test", "bytes", "iterations", "bw_peak", "bw_avg", "msg_rate",
	"t_min", "t_max", "t_typical", "t_avg", "t_stdev", "p99", "p99_9", "scheme", "loss"}

// Record returns r as CSV fields in CSVHeader's order.
func (r Row) Record() []string {
	f := func(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
	rec := []string{r.Test, strconv.Itoa(r.Bytes), strconv.Itoa(r.Iters), "", "", "", "", "", "", "", "", "", "", r.Scheme, f(r.LossPct, -1)}
	if r.Lat == nil {
		rec[3], rec[4], rec[5] = f(r.PeakGbps, 4), f(r.AvgGbps, 4), f(r.MsgRateMpps, 6)
		if r.NoPeak {
			rec[3] = ""
		}
	} else {
		l := r.Lat
		for i, d := range []time.Duration{l.Min, l.Max, l.Typical, l.Avg, l.Stdev, l.P99, l.P999} {
			rec[6+i] = f(usec(d), 3)
		}
		if r.RespBytes > 0 {
			rec[5] = f(r.MsgRateMpps, 6)
		}
	}
	return rec
}

// AppendCSV appends rows to the CSV file at path, creating it, and writes
// the header first when the file is new or empty.
func AppendCSV(path string, rows ...Row) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	w := csv.NewWriter(f)
	if st.Size() == 0 {
		_ = w.Write(CSVHeader)
	}
	for _, r := range rows {
		_ = w.Write(r.Record())
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("perftest: write %s: %w", path, err)
	}
	return f.Close()
}
