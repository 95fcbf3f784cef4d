//go:build !unix

package qp

import "unsafe"

// mapping: without mmap every ring is a Go slice.
type mapping struct{}

func mapAnon(uintptr) *mapping        { return nil }
func (*mapping) base() unsafe.Pointer { return nil }
func (*mapping) unmap()               {}
