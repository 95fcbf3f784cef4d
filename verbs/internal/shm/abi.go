package shm

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"runtime"
	"sync"

	"github.com/softnic/softnic/qp"
)

// The rings carry qp.SendWR, qp.RecvWR and qp.WC as raw bytes: the client
// library and the daemon are separate binaries, so both must lay these
// structs out identically. Two things make the byte copy safe:
//
//   - the types hold only integers and arrays/structs of integers: no
//     pointer, string, slice, map, interface or bool, so every bit pattern
//     a hostile client writes is a valid value (the engine then checks
//     the values themselves, as it does for any caller);
//   - Fingerprint hashes every field's name, kind, offset and size and
//     the architecture; the client sends it at hello and the daemon
//     refuses a mismatch, so a client built against a different softnic
//     fails at connect time, not with scrambled work requests.

// entryTypes are the types that cross the rings.
var entryTypes = []reflect.Type{
	reflect.TypeFor[qp.SendWR](),
	reflect.TypeFor[qp.RecvWR](),
	reflect.TypeFor[qp.WC](),
}

var abi = sync.OnceValues(func() (uint64, error) {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s;", runtime.GOARCH) // GOARCH fixes byte order and int size
	for _, t := range entryTypes {
		if err := describe(h, t, t.Name()); err != nil {
			return 0, err
		}
	}
	return h.Sum64(), nil
})

// Fingerprint identifies the memory layout of the ring entry types. It
// fails if a type gained a field that cannot be copied as plain bytes.
func Fingerprint() (uint64, error) { return abi() }

type writer interface{ Write([]byte) (int, error) }

// describe writes t's layout to h, recursing into structs and arrays.
func describe(h writer, t reflect.Type, path string) error {
	fmt.Fprintf(h, "%s:%s:%d:%d;", path, t.Kind(), t.Size(), t.Align())
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return nil
	case reflect.Array:
		fmt.Fprintf(h, "len=%d;", t.Len())
		return describe(h, t.Elem(), path+"[]")
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			fmt.Fprintf(h, "@%d;", f.Offset)
			if err := describe(h, f.Type, path+"."+f.Name); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("shm: %s is a %s: ring entries must be plain integers to be shared between processes", path, t.Kind())
}
