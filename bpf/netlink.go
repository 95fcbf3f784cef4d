//go:build linux

package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// This file speaks just enough rtnetlink to see which XDP programs an
// interface carries and to attach or remove one the pre-bpf_link way
// (RTM_SETLINK with IFLA_XDP), which is how `ip link set dev X xdp ...`
// does it. bpf links cannot see or remove such attachments, and netlink
// cannot remove a bpf_link attachment (the kernel answers EBUSY); DetachStale
// needs both views.

// IFLA_XDP_ATTACHED values (uapi linux/if_link.h); x/sys/unix lacks them.
const (
	xdpAttachedNone  = 0
	xdpAttachedDrv   = 1
	xdpAttachedSKB   = 2
	xdpAttachedHW    = 3
	xdpAttachedMulti = 4
)

// nlaTypeMask strips NLA_F_NESTED and NLA_F_NET_BYTEORDER from an
// attribute type (uapi NLA_TYPE_MASK).
const nlaTypeMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)

// xdpAttachment is one XDP program on an interface, as netlink reports it.
type xdpAttachment struct {
	// mode is one of unix.XDP_FLAGS_{DRV,SKB,HW}_MODE, the flag that
	// removes it again.
	mode   uint32
	progID uint32
}

// nlAttr appends one netlink attribute (4-byte aligned) to b.
func nlAttr(b []byte, typ uint16, value []byte) []byte {
	n := unix.SizeofNlAttr + len(value)
	b = binary.NativeEndian.AppendUint16(b, uint16(n))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, value...)
	for len(b)%unix.NLMSG_ALIGNTO != 0 {
		b = append(b, 0)
	}
	return b
}

// parseAttrs walks a buffer of netlink attributes; a truncated attribute
// ends the walk (the kernel does not produce one).
func parseAttrs(b []byte, fn func(typ uint16, value []byte)) {
	for len(b) >= unix.SizeofNlAttr {
		n := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) & nlaTypeMask
		if n < unix.SizeofNlAttr || n > len(b) {
			return
		}
		fn(typ, b[unix.SizeofNlAttr:n])
		aligned := (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if aligned >= len(b) {
			return
		}
		b = b[aligned:]
	}
}

// rtnetlink sends one request for ifindex (an ifinfomsg followed by attrs)
// and returns the replies. The socket lives in the calling thread's network
// namespace, so ifindex is resolved there.
func rtnetlink(msgType uint16, flags uint16, ifindex int, attrs []byte) ([]syscall.NetlinkMessage, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, os.NewSyscallError("socket(AF_NETLINK)", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("bind(AF_NETLINK)", err)
	}

	const seq = 1
	req := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+unix.SizeofIfInfomsg+len(attrs))
	// struct ifinfomsg: family, pad, type, index, flags, change.
	req = append(req, unix.AF_UNSPEC, 0, 0, 0)
	req = binary.NativeEndian.AppendUint32(req, uint32(int32(ifindex)))
	req = binary.NativeEndian.AppendUint32(req, 0)
	req = binary.NativeEndian.AppendUint32(req, 0)
	req = append(req, attrs...)
	// struct nlmsghdr: len, type, flags, seq, pid (0: the kernel).
	binary.NativeEndian.PutUint32(req[0:4], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:6], msgType)
	binary.NativeEndian.PutUint16(req[6:8], unix.NLM_F_REQUEST|flags)
	binary.NativeEndian.PutUint32(req[8:12], seq)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("sendto(rtnetlink)", err)
	}

	buf := make([]byte, 1<<16)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return nil, os.NewSyscallError("recvfrom(rtnetlink)", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return nil, fmt.Errorf("parse rtnetlink reply: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type != unix.NLMSG_ERROR {
			continue
		}
		if len(m.Data) < 4 {
			return nil, errors.New("short rtnetlink error message")
		}
		// An error message carries -errno; 0 is the ACK.
		if errno := -int32(binary.NativeEndian.Uint32(m.Data[:4])); errno != 0 {
			return nil, unix.Errno(errno)
		}
	}
	return msgs, nil
}

// xdpAttachments lists the XDP programs on ifindex in the calling thread's
// network namespace.
func xdpAttachments(ifindex int) ([]xdpAttachment, error) {
	msgs, err := rtnetlink(unix.RTM_GETLINK, 0, ifindex, nil)
	if err != nil {
		return nil, fmt.Errorf("RTM_GETLINK ifindex %d: %w", ifindex, err)
	}
	var list []xdpAttachment
	for i := range msgs {
		if msgs[i].Header.Type != unix.RTM_NEWLINK {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(&msgs[i])
		if err != nil {
			return nil, fmt.Errorf("parse RTM_NEWLINK: %w", err)
		}
		for _, a := range attrs {
			if a.Attr.Type&nlaTypeMask != unix.IFLA_XDP {
				continue
			}
			var attached uint8
			ids := map[uint16]uint32{}
			parseAttrs(a.Value, func(typ uint16, v []byte) {
				switch {
				case typ == unix.IFLA_XDP_ATTACHED && len(v) >= 1:
					attached = v[0]
				case len(v) >= 4:
					ids[typ] = binary.NativeEndian.Uint32(v)
				}
			})
			// With one program IFLA_XDP_PROG_ID names it and
			// IFLA_XDP_ATTACHED its mode; with several (MULTI) each
			// mode has its own *_PROG_ID.
			switch attached {
			case xdpAttachedNone:
			case xdpAttachedDrv:
				list = append(list, xdpAttachment{unix.XDP_FLAGS_DRV_MODE, ids[unix.IFLA_XDP_PROG_ID]})
			case xdpAttachedSKB:
				list = append(list, xdpAttachment{unix.XDP_FLAGS_SKB_MODE, ids[unix.IFLA_XDP_PROG_ID]})
			case xdpAttachedHW:
				list = append(list, xdpAttachment{unix.XDP_FLAGS_HW_MODE, ids[unix.IFLA_XDP_PROG_ID]})
			case xdpAttachedMulti:
				for typ, mode := range map[uint16]uint32{
					unix.IFLA_XDP_DRV_PROG_ID: unix.XDP_FLAGS_DRV_MODE,
					unix.IFLA_XDP_SKB_PROG_ID: unix.XDP_FLAGS_SKB_MODE,
					unix.IFLA_XDP_HW_PROG_ID:  unix.XDP_FLAGS_HW_MODE,
				} {
					if id := ids[typ]; id != 0 {
						list = append(list, xdpAttachment{mode, id})
					}
				}
			}
		}
	}
	return list, nil
}

// setXDP attaches the program fd to ifindex in the given mode
// (unix.XDP_FLAGS_*_MODE), or removes the program of that mode when fd is
// -1, via RTM_SETLINK/IFLA_XDP like `ip link set dev X xdp{generic,drv} ...`.
func setXDP(ifindex, fd int, mode uint32) error {
	var nested []byte
	nested = nlAttr(nested, unix.IFLA_XDP_FD, binary.NativeEndian.AppendUint32(nil, uint32(int32(fd))))
	nested = nlAttr(nested, unix.IFLA_XDP_FLAGS, binary.NativeEndian.AppendUint32(nil, mode))
	attrs := nlAttr(nil, unix.IFLA_XDP|unix.NLA_F_NESTED, nested)
	if _, err := rtnetlink(unix.RTM_SETLINK, unix.NLM_F_ACK, ifindex, attrs); err != nil {
		return fmt.Errorf("RTM_SETLINK IFLA_XDP ifindex %d: %w", ifindex, err)
	}
	return nil
}
