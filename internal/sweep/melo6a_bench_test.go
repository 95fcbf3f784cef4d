//go:build linux

package sweep

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkMeloReorderCopy measures what MeloCopyBytesPerSec states: one
// core copying out-of-order payload from a reorder buffer to the
// application, MELO §4.2.1's reorder copy, in the chunks it comes in (one
// 1 KB packet, the MTU of MELO's §4). The reorder buffer is one
// connection's BDP of memory (Fig. 6a's 512 KB, indexed by PSN, so it is
// reused round and round and stays in cache); the application buffer is
// 256 MiB written once round (past the 32 MiB L3 of the machine it was
// measured on: the application's memory is not in cache). "dst-cached"
// copies into a second 512 KB ring, for comparison.
//
// Besides Go's wall-clock MB/s the benchmark reports cpu-MB/s: bytes over
// the thread's CPU time (CLOCK_THREAD_CPUTIME_ID, the goroutine locked to
// its thread), which a machine shared with other work does not dilute:
// the paper's CPU usage is the CPU time to copy a second's trace.
//
//	go test -run '^$' -bench BenchmarkMeloReorderCopy -benchtime 2s -count 5 ./internal/sweep
func BenchmarkMeloReorderCopy(b *testing.B) {
	const chunk, ring = 1024, 512 << 10
	for _, c := range []struct {
		name string
		dst  int
	}{{"dst-256MiB", 256 << 20}, {"dst-cached", ring}} {
		b.Run(c.name, func(b *testing.B) {
			src, dst := make([]byte, ring), make([]byte, c.dst)
			for i := range src {
				src[i] = byte(i)
			}
			for i := 0; i < len(dst); i += 4096 {
				dst[i] = 1 // fault the pages in before timing
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.SetBytes(chunk)
			cpu0 := threadCPU(b)
			s, d := 0, 0
			b.ResetTimer()
			for range b.N {
				copy(dst[d:d+chunk], src[s:s+chunk])
				if s += chunk; s == len(src) {
					s = 0
				}
				if d += chunk; d == len(dst) {
					d = 0
				}
			}
			b.StopTimer()
			if secs := threadCPU(b) - cpu0; secs > 0 {
				b.ReportMetric(float64(b.N)*chunk/secs/1e6, "cpu-MB/s")
			}
		})
	}
}

// threadCPU is the calling thread's CPU time, seconds.
func threadCPU(b *testing.B) float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}
