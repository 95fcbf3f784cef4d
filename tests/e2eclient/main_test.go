package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestDoneBarrier: the "requester done" barrier carries the requester's
// outcome to the responder, which must not judge its memory after a
// requester that failed (what it sent may still be landing there).
func TestDoneBarrier(t *testing.T) {
	if e, err := parseDone(doneMessage(nil)); e != "" || err != nil {
		t.Errorf("success: %q, %v", e, err)
	}
	failed := errors.New("no send completion within 10s")
	if e, err := parseDone(doneMessage(failed)); e != failed.Error() || err != nil {
		t.Errorf("failure: %q, %v; want %q", e, err, failed)
	}
	if _, err := parseDone([]byte("step 3: RDMA_WRITE 8 round 0")); err == nil || !strings.Contains(err.Error(), "out of step") {
		t.Errorf("another barrier: %v, want out of step", err)
	}
}

// TestCheck: the first differing byte is reported with its value and the
// expected one, which differ (the message is made from one copy of the
// memory), and an overwritten guard byte is caught.
func TestCheck(t *testing.T) {
	const seed = 42
	got := make([]byte, 100)
	fill(got, seed)
	guardBytes := []byte{poison, poison}
	if err := check("data", got, seed, guardBytes); err != nil {
		t.Fatal(err)
	}
	want := got[17]
	got[17] ^= 0x10
	got[50] ^= 0x01
	err := check("data", got, seed, guardBytes)
	if msg := fmt.Sprintf("data: byte 17 of 100 is %#02x, want %#02x (2 bytes differ)", want^0x10, want); err == nil || err.Error() != msg {
		t.Errorf("%v, want %q", err, msg)
	}
	got[17] ^= 0x10
	got[50] ^= 0x01
	guardBytes[1] = 0
	if err := check("data", got, seed, guardBytes); err == nil || !strings.Contains(err.Error(), "byte 1 after them was overwritten (0x00)") {
		t.Errorf("guard: %v", err)
	}
}
