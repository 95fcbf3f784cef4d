//go:build linux

package bpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// ProgramName is the kernel name of the steering program (the C function
// name). DetachStale recognises softnic's own attachments by it.
const ProgramName = "xdp_steer"

// Mode is where in the receive path the program runs.
type Mode int

const (
	// ModeDriver runs the program in the driver before an skb exists
	// ("native" XDP). veth supports it; AF_XDP sockets then still work in
	// copy mode (XDP_COPY), since veth has no zero-copy support.
	ModeDriver Mode = iota + 1
	// ModeGeneric runs it on the skb in the core receive path ("SKB
	// mode"): works on every interface, slower, always copy mode.
	ModeGeneric
)

func (m Mode) String() string {
	switch m {
	case ModeDriver:
		return "driver"
	case ModeGeneric:
		return "generic"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

func (m Mode) flags() link.XDPAttachFlags {
	if m == ModeGeneric {
		return link.XDPGenericMode
	}
	return link.XDPDriverMode
}

// Link is an attached program. It is a link.Link (a bpf_link), so the
// attachment ends when Close is called or when the process that made it
// exits, even by SIGKILL: the kernel releases the link with its last fd.
type Link struct {
	link.Link
	// Mode is the mode the program ended up attached in.
	Mode Mode
	// Ifindex is the interface, in the network namespace of the thread
	// that called Attach.
	Ifindex int
}

// Attach attaches prog to the interface ifindex, trying driver mode first
// and falling back to generic mode. Driver mode fails on drivers without
// native XDP and, on veth, when the peer's MTU does not fit one page with
// XDP headroom (about 3.5 KB) unless the program is built for frags, as
// softnic's is (Steer.Frags); generic mode always works. Link.Mode says
// which one ran: the dataplane must bind AF_XDP sockets in copy mode in
// either case on veth.
//
// The interface is looked up in the calling thread's network namespace:
// call it from inside netns.Do (or an equivalent locked thread) to attach in
// another namespace.
func Attach(prog *ebpf.Program, ifindex int) (*Link, error) {
	l, errDriver := AttachMode(prog, ifindex, ModeDriver)
	if errDriver == nil {
		return l, nil
	}
	l, errGeneric := AttachMode(prog, ifindex, ModeGeneric)
	if errGeneric == nil {
		return l, nil
	}
	return nil, fmt.Errorf("bpf: attach XDP to ifindex %d: %v; %w", ifindex, errDriver, errGeneric)
}

// AttachMode attaches prog to ifindex in exactly the given mode.
func AttachMode(prog *ebpf.Program, ifindex int, mode Mode) (*Link, error) {
	if mode != ModeDriver && mode != ModeGeneric {
		return nil, fmt.Errorf("bpf: attach: unknown mode %v", mode)
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: mode.flags()})
	if err != nil {
		return nil, fmt.Errorf("%s mode: %w%s", mode, err, busyHint(err))
	}
	return &Link{Link: l, Mode: mode, Ifindex: ifindex}, nil
}

// busyHint explains EBUSY/EEXIST, which mean another program already
// holds the hook.
func busyHint(err error) string {
	if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST) {
		return " (another XDP program holds the hook; one that softnic left behind can be removed with bpf.DetachStale)"
	}
	return ""
}

// ErrForeignProgram is returned by DetachStale when the interface carries
// an XDP program that is not softnic's; DetachStale leaves it alone.
var ErrForeignProgram = errors.New("bpf: interface carries an XDP program that is not softnic's")

// DetachStale removes softnic's XDP program from ifindex (in the calling
// thread's network namespace) and returns how many attachments it removed.
//
// A program attached by Attach is held by a bpf_link and goes away when its
// process dies, so normally there is nothing to do. Two cases leave one
// behind: a program attached the pre-bpf_link way (netlink IFLA_XDP, e.g.
// by `ip link set dev X xdp obj ...` or by an older build), which stays
// until someone removes it; and a link that outlives its process because it
// was pinned in bpffs or its fd was passed to another process. DetachStale
// reads the attachments from rtnetlink (RTM_GETLINK, IFLA_XDP) and, for
// each program named ProgramName:
//   - removes a netlink attachment with RTM_SETLINK IFLA_XDP_FD=-1 in that
//     mode, exactly what `ip link set dev X xdp off` does;
//   - if the kernel answers EBUSY (the attachment is a bpf_link), finds the
//     XDP link for that program ID and ifindex and detaches it
//     (BPF_LINK_DETACH), which breaks the link for its holder too.
//
// It refuses (ErrForeignProgram) to touch a program with another name. It
// must not be called while a live softnic daemon owns the interface.
func DetachStale(ifindex int) (int, error) {
	attachments, err := xdpAttachments(ifindex)
	if err != nil {
		return 0, fmt.Errorf("bpf: detach stale: %w", err)
	}
	removed := 0
	for _, a := range attachments {
		name, err := programName(a.progID)
		if err != nil {
			return removed, fmt.Errorf("bpf: detach stale: %w", err)
		}
		if name != ProgramName {
			return removed, fmt.Errorf("%w: ifindex %d has %q (id %d)", ErrForeignProgram, ifindex, name, a.progID)
		}
		err = setXDP(ifindex, -1, a.mode)
		if errors.Is(err, unix.EBUSY) {
			err = detachLink(ifindex, a.progID)
		}
		if err != nil {
			return removed, fmt.Errorf("bpf: detach stale program id %d: %w", a.progID, err)
		}
		removed++
	}
	return removed, nil
}

func programName(id uint32) (string, error) {
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return "", fmt.Errorf("open program id %d: %w", id, err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		return "", fmt.Errorf("program id %d info: %w", id, err)
	}
	return info.Name, nil
}

// detachLink detaches the XDP bpf_link that attaches program progID to
// ifindex. Links are global while ifindexes are per namespace, so the
// program ID (global, and taken from this namespace's interface) is what
// makes the match unambiguous.
func detachLink(ifindex int, progID uint32) error {
	var it link.Iterator
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil || info.Type != link.XDPType || info.Program != ebpf.ProgramID(progID) {
			continue
		}
		if xdp := info.XDP(); xdp == nil || int(xdp.Ifindex) != ifindex {
			continue
		}
		return it.Link.Detach()
	}
	if err := it.Err(); err != nil {
		return err
	}
	return fmt.Errorf("no bpf_link found for XDP program id %d on ifindex %d", progID, ifindex)
}
