package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMeasure: a.go and b.go use each other (a calls b's function, b
// names a's type and calls its method), c.go uses a.go only, and d.go
// stands alone: one two-way pair, a strongly connected set of two files,
// the type's two methods; test files, and files a build constraint
// excludes, are not counted.
func TestMeasure(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"a.go":      "package p\n\ntype T struct{}\n\nfunc (T) M() int { return g() }\n",
		"b.go":      "package p\n\nfunc g() int { return 1 }\n\nfunc (t T) N() int { return t.M() }\n",
		"c.go":      "package p\n\nvar v = T{}\n",
		"d.go":      "package p\n\nconst k = 2\n",
		"a_test.go": "package p\n\nvar w = v\n",
		"z.go":      "//go:build ignore\n\npackage p\n\nvar z = v\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := measure(dir, "T")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.files) != 4 || r.methods != 2 {
		t.Fatalf("%d files, %d methods; want 4 and 2", len(r.files), r.methods)
	}
	if !slices.Equal(r.twoWay, []string{"a.go <-> b.go"}) {
		t.Fatalf("two-way pairs %v", r.twoWay)
	}
	if r.largest != 2 || !slices.Equal(r.sccs[0], []string{"a.go", "b.go"}) {
		t.Fatalf("largest strongly connected set %d: %v", r.largest, r.sccs)
	}
	if r.edges["c.go"]["a.go"] == nil || r.edges["a.go"]["c.go"] != nil {
		t.Fatalf("edges of c.go: %v; of a.go: %v", r.edges["c.go"], r.edges["a.go"])
	}
}

// TestTypeError: a package that does not type-check is refused, not
// undercounted.
func TestTypeError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("package p\n\nvar v = undefined\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := measure(dir, "T"); err == nil || !strings.Contains(err.Error(), "undefined") {
		t.Fatalf("err %v, want the type error", err)
	}
}
