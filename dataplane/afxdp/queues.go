//go:build linux

package afxdp

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolChannels is struct ethtool_channels (uapi linux/ethtool.h).
type ethtoolChannels struct {
	Cmd                                         uint32
	MaxRx, MaxTx, MaxOther, MaxCombined         uint32
	RxCount, TxCount, OtherCount, CombinedCount uint32
}

// RXQueues returns how many receive queues ifname has in the calling
// thread's network namespace: ETHTOOL_GCHANNELS's rx + combined count,
// the queues that actually deliver frames (binding a socket to a queue the
// driver allocated but does not use fails). sysfs cannot tell: it shows
// the namespace of the mount, not of the thread. A driver without
// get_channels has one queue as far as AF_XDP can use it.
func RXQueues(ifname string) int {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 1
	}
	defer unix.Close(fd)
	ch := ethtoolChannels{Cmd: unix.ETHTOOL_GCHANNELS}
	// struct ifreq: the name, then a union whose ifr_data points at the
	// ethtool command. A typed pointer, so the GC and stack copying see it.
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data *ethtoolChannels
		_    [16]byte // rest of the union
	}
	copy(ifr.name[:unix.IFNAMSIZ-1], ifname)
	ifr.data = &ch
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if errno != 0 {
		return 1
	}
	return max(1, int(ch.RxCount+ch.CombinedCount))
}

// CheckQueues reports, in one line, a queue of queues that ifname (in the
// calling thread's network namespace) does not have: binding a socket to
// it would fail with EINVAL in every bind mode, which says nothing of why.
func CheckQueues(ifname string, queues []int) error {
	n := RXQueues(ifname)
	for _, q := range queues {
		if q < 0 || q >= n {
			return fmt.Errorf("%s has %s, no queue %d", ifname, describeQueues(n), q)
		}
	}
	return nil
}

// describeQueues is "1 RX queue (0)" or "4 RX queues (0-3)".
func describeQueues(n int) string {
	if n == 1 {
		return "1 RX queue (0)"
	}
	return fmt.Sprintf("%d RX queues (0-%d)", n, n-1)
}
