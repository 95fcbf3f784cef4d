//go:build linux

package bpf

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Holder is a live process that holds an interface's XDP program through
// a bpf_link (a softnic daemon, or a program in softnic's direct mode).
type Holder struct {
	LinkID uint32
	ProgID uint32
	// PID and Comm are the process with a descriptor of the link (0, ""
	// when no process of this PID namespace shows one).
	PID  int
	Comm string
}

// LinkHolder finds the bpf_link that holds softnic's XDP program on
// ifindex (in the calling thread's network namespace) and the process
// that holds the link. ok is false when no link holds a program there
// (nothing attached, or a netlink attachment that DetachStale removes).
// Listing links needs CAP_SYS_ADMIN; without it, ok is false.
func LinkHolder(ifindex int) (h Holder, ok bool, err error) {
	atts, err := xdpAttachments(ifindex)
	if err != nil {
		return h, false, err
	}
	for _, a := range atts {
		var it link.Iterator
		for it.Next() {
			info, err := it.Link.Info()
			if err != nil || info.Type != link.XDPType || info.Program != ebpf.ProgramID(a.progID) {
				continue
			}
			if x := info.XDP(); x != nil && int(x.Ifindex) == ifindex {
				h = Holder{LinkID: uint32(info.ID), ProgID: a.progID}
				h.PID = linkPID(h.LinkID)
				if h.PID > 0 {
					b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", h.PID))
					h.Comm = strings.TrimSpace(string(b))
				}
				it.Close()
				return h, true, nil
			}
		}
		err := it.Err()
		it.Close()
		if err != nil && !errors.Is(err, unix.EPERM) {
			return h, false, fmt.Errorf("list bpf links: %w", err)
		}
	}
	return h, false, nil
}

// linkPID is a process with a descriptor of bpf_link id: the kernel shows
// "link_id:" in the descriptor's /proc/PID/fdinfo.
func linkPID(id uint32) int {
	want := "link_id:\t" + strconv.FormatUint(uint64(id), 10)
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", p.Name(), "fdinfo")
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if fdinfoHas(filepath.Join(dir, fd.Name()), want) {
				return pid
			}
		}
	}
	return 0
}

func fdinfoHas(path, line string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if s.Text() == line {
			return true
		}
	}
	return false
}
