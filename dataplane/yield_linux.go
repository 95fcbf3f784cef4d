package dataplane

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// osYield gives the processor to another runnable thread, if any
// (sched_yield(2)); runtime.Gosched would only switch goroutines inside
// this process, and a peer daemon or the application waiting for a core
// would wait for the kernel's time slice instead.
func osYield() { _, _, _ = unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// yieldCPU is an empty poll's yield: the process's other goroutines (the
// control plane) first, then other threads and processes.
func yieldCPU() {
	runtime.Gosched()
	osYield()
}
