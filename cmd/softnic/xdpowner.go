package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/bpf"
)

// checkNoLiveDaemon refuses an interface whose XDP program is held by a
// bpf_link: a softnic daemon attaches through a link, which the kernel
// releases when the daemon exits, even by SIGKILL, so a link still there
// means a live daemon owns the interface (with another control socket).
// bpf.DetachStale would break that daemon's link; a program attached the
// netlink way has no owner and is what DetachStale is for.
func checkNoLiveDaemon(ifi *net.Interface) error {
	progID, err := xdpProgID(ifi.Index)
	if err != nil || progID == 0 {
		return err
	}
	// Links are global and their ifindex is per namespace; the program ID
	// read from this namespace's interface is what makes a match certain.
	var it link.Iterator
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil || info.Type != link.XDPType || info.Program != ebpf.ProgramID(progID) {
			continue
		}
		if x := info.XDP(); x != nil && int(x.Ifindex) == ifi.Index {
			// Name the holder when /proc shows it: a daemon, or a
			// program running softnic in direct mode (docs/direct.md).
			if h, ok, err := bpf.LinkHolder(ifi.Index); err == nil && ok && h.PID > 0 {
				return fmt.Errorf("interface %s is in use: XDP program %d is attached by %s (pid %d, bpf_link %d), another softnic daemon or a program in direct mode; stop it first",
					ifi.Name, progID, h.Comm, h.PID, info.ID)
			}
			return fmt.Errorf("interface %s is in use: XDP program %d is attached by a live process (bpf_link %d), likely another softnic daemon; stop it first",
				ifi.Name, progID, info.ID)
		}
	}
	if err := it.Err(); err != nil && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("list bpf links: %w", err)
	}
	// Without CAP_SYS_ADMIN the links cannot be listed; DetachStale then
	// cannot break a live link either (it needs the same listing), so
	// going on is safe.
	return nil
}

// xdpProgID reads the ID of the XDP program attached to ifindex from
// rtnetlink (IFLA_XDP / IFLA_XDP_PROG_ID), in the calling thread's
// namespace; 0 means none.
func xdpProgID(ifindex int) (uint32, error) {
	rib, err := syscall.NetlinkRIB(unix.RTM_GETLINK, unix.AF_UNSPEC)
	if err != nil {
		return 0, fmt.Errorf("rtnetlink: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return 0, fmt.Errorf("rtnetlink: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWLINK || len(m.Data) < unix.SizeofIfInfomsg {
			continue
		}
		if int(int32(binary.NativeEndian.Uint32(m.Data[4:8]))) != ifindex {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return 0, fmt.Errorf("rtnetlink: %w", err)
		}
		for _, a := range attrs {
			if a.Attr.Type&^unix.NLA_F_NESTED != unix.IFLA_XDP {
				continue
			}
			for b := a.Value; len(b) >= unix.SizeofNlAttr; {
				n := int(binary.NativeEndian.Uint16(b))
				typ := binary.NativeEndian.Uint16(b[2:])
				if n < unix.SizeofNlAttr || n > len(b) {
					break
				}
				if typ == unix.IFLA_XDP_PROG_ID && n >= unix.SizeofNlAttr+4 {
					return binary.NativeEndian.Uint32(b[unix.SizeofNlAttr:]), nil
				}
				b = b[min(len(b), (n+3)&^3):]
			}
		}
		return 0, nil
	}
	return 0, errors.New("rtnetlink: interface vanished")
}
