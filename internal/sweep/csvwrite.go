package sweep

import (
	"encoding/csv"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// WriteQPCSV writes the sweep's rows.
func WriteQPCSV(w io.Writer, rs []QPResult) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"scheme", "qps", "size", "loss", "sram_bytes", "fetch_penalty_ns", "messages", "msg_rate", "goodput_gbps", "cache_misses", "hit_rate", "peak_resident_qps", "sr_bytes", "retransmits"})
	for _, r := range rs {
		cw.Write([]string{r.Scheme, strconv.Itoa(r.QPs), strconv.Itoa(r.Size), strconv.FormatFloat(r.Loss, 'g', -1, 64),
			strconv.Itoa(r.SRAM), strconv.FormatInt(int64(r.Penalty), 10), strconv.FormatUint(r.Messages, 10),
			strconv.FormatFloat(r.MsgRate, 'f', 0, 64), strconv.FormatFloat(r.GoodputGbps, 'f', 3, 64),
			strconv.FormatUint(r.Misses, 10), strconv.FormatFloat(r.HitRate, 'f', 4, 64), strconv.Itoa(r.PeakQPs),
			strconv.Itoa(r.SRBytes), strconv.FormatUint(r.Retransmits, 10)})
	}
	cw.Flush()
	return cw.Error()
}

// SaveQPs writes the rows to <dir>/<prefix>.csv and returns its path.
// The plots are drawn from it by softnic-sweep (internal/sweepplot), so
// that the daemon, which runs these sweeps too, links no plotting code.
func SaveQPs(dir, prefix string, rs []QPResult) (string, error) {
	return saveCSV(dir, prefix+".csv", func(w io.Writer) error { return WriteQPCSV(w, rs) })
}

// CCName is a congestion control as the CSVs and tables write it:
// "none" for none ("").
func CCName(cc string) string {
	if cc == "" {
		return "none"
	}
	return cc
}

// PFCName is PFC on or off as the CSVs and tables write it.
func PFCName(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// saveCSV creates dir and writes name in it with write.
func saveCSV(dir, name string, write func(io.Writer) error) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := write(f); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}
