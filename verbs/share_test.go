package verbs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/softnic/softnic/dataplane/sim"
)

// TestShareMemory: memory the process got elsewhere (here an anonymous
// private mapping, as malloc's) becomes registrable in place: its
// contents survive, the same addresses now reach the shared pages, RegMR
// accepts a range inside, a second range inside is reused, a range
// partly outside fails, and FreeBuf never unmaps it.
func TestShareMemory(t *testing.T) {
	d := startDaemons(t, sim.Config{}, false)
	ctx, err := Dial(d.sockA)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	page := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 4*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	for i := range mem {
		mem[i] = byte(i * 7)
	}
	want := bytes.Clone(mem)

	buf, err := ctx.ShareMemory(unsafe.Pointer(&mem[100]), 2*page)
	if err != nil {
		t.Fatal(err)
	}
	if &buf[0] != &mem[100] || len(buf) != 2*page {
		t.Fatalf("ShareMemory returned %p+%d, want the range itself %p+%d", &buf[0], len(buf), &mem[100], 2*page)
	}
	if !bytes.Equal(mem, want) {
		t.Fatal("the memory's contents changed when it was shared")
	}
	// The pages are now the memfd's: a shared file mapping, which
	// /proc/self/maps names.
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&mem[0])))
	found := false
	for _, l := range strings.Split(string(maps), "\n") {
		if strings.HasPrefix(l, start) {
			found = true
			if !strings.Contains(l, "rw-s") || !strings.Contains(l, "memfd:softnic-mr") {
				t.Errorf("the shared pages are mapped as %q, want a shared memfd", l)
			}
		}
	}
	if !found {
		t.Errorf("no mapping starts at %s in /proc/self/maps", start)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(buf[10:1000], AccessLocalWrite|AccessRemoteWrite)
	if err != nil {
		t.Fatalf("RegMR on shared memory: %v", err)
	}
	if mr.Addr != uint64(uintptr(unsafe.Pointer(&mem[110]))) {
		t.Fatalf("region address %#x, want the process's address %p", mr.Addr, &mem[110])
	}
	mem[200] = 0xab // still ordinary memory for the process
	if buf[100] != 0xab {
		t.Fatal("a write through the old slice is not seen through the shared one")
	}
	if again, err := ctx.ShareMemory(unsafe.Pointer(&mem[page]), 100); err != nil || &again[0] != &mem[page] {
		t.Fatalf("ShareMemory inside shared memory: %v", err)
	}
	if _, err := ctx.ShareMemory(unsafe.Pointer(&mem[2*page]), 2*page); !errors.Is(err, ErrShareOverlap) {
		t.Fatalf("ShareMemory of a range partly shared: %v, want ErrShareOverlap", err)
	}
	if err := ctx.FreeBuf(buf); err == nil {
		t.Fatal("FreeBuf of shared process memory succeeded")
	}
	if err := mr.Dereg(); err != nil {
		t.Fatal(err)
	}
	if _, err := ctx.ShareMemory(nil, 10); err == nil {
		t.Fatal("ShareMemory(nil) succeeded")
	}
}
