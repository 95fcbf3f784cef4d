package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// tiny is a package of four files that counts every figure:
//   - a.go declares T (embedding E) with two methods: M calls E's N
//     promoted through the embedded field (and again in a function literal,
//     by the field's name), V calls I's Do through the interface;
//   - b.go has g, which a.go calls, so a.go and b.go use each other; h and
//     k take *T and ...T (functions counted in T's figure); E.Take, a
//     method of another type taking *T, calls T's M; b.go calls d.go's f;
//   - c.go declares E, I and F, and names g and T only in a comment, a
//     local, a field and a type parameter: none of them a use;
//   - d.go's f names T and T.V, closing the cycle a -> b -> d -> a;
//   - a test file and a file excluded by a build constraint would add
//     methods, calls and edges if they were read.
var tiny = map[string]string{
	"a.go": `package p

// T is the measured type.
type T struct{ E }

func (t *T) M() int {
	_ = t.N // a method value, not a call
	return t.N() + g()
}

func (t T) V(i I) int {
	func() { t.E.N() }()
	return i.Do()
}
`,
	"b.go": `package p

func g() int { return 1 }

func h(t *T) int { return t.M() } // a call in a function, not a method

func k(ts ...T) {}

func (e E) Take(t *T) { t.M() }

func callF() int { return f() }
`,
	"c.go": `package p

// E is embedded in T. Naming g, h or T here is not a use.
type E struct{}

func (E) N() int { return 0 }

// I is called through an interface.
type I interface{ Do() int }

// F's field g is not b.go's g, nor is the local g.
type F struct{ g int }

func (f F) get() int {
	g := f.g
	return g
}

// Gen's T is its type parameter, not a.go's T.
func Gen[T any](x *T) *T { return x }
`,
	"d.go": `package p

func f() int {
	var t T
	return t.V(nil)
}
`,
	"c_test.go": `package p

func (f F) viaT(t *T) int { return t.M() }

func takesT(t *T) {}
`,
	"z.go": `//go:build ignore

package p

func (f F) alsoT(t *T) int { return t.M() }
`,
}

func writePackage(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestMeasure(t *testing.T) {
	r, err := measure(writePackage(t, tiny), "T")
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %#v\nwant %#v", what, got, want)
		}
	}
	check("files", r.Files, []string{"a.go", "b.go", "c.go", "d.go"})
	check("type figure", r.Type, typeFigure{
		Name: "T", Found: true, Total: 4, Methods: 2, Functions: 2,
		FunctionList: []string{"h", "k"},
		OtherMethods: 1, OtherMethodList: []string{"E.Take"},
	})
	check("methods per type", r.MethodsPerType, []typeCount{
		{Type: "E", Methods: 2},
		{Type: "T", Methods: 2},
		{Type: "F", Methods: 1},
		{Type: "I", Methods: 1, Interface: true},
	})
	check("calls", r.Calls, []callPair{
		{From: "T", To: "E", Sites: 2}, // t.N() promoted, t.E.N() in a function literal
		{From: "E", To: "T", Sites: 1}, // Take's t.M()
		{From: "T", To: "I", Sites: 1}, // i.Do() through the interface
	})
	check("two-way types", r.TwoWayTypes, []typePair{{A: "E", B: "T", AToB: 1, BToA: 2}})
	check("file edges", r.FileEdges, []fileEdge{
		{From: "a.go", To: "b.go", Names: []string{"g"}},
		{From: "a.go", To: "c.go", Names: []string{"E", "E.N", "I", "I.Do"}},
		{From: "b.go", To: "a.go", Names: []string{"T", "T.M"}},
		{From: "b.go", To: "c.go", Names: []string{"E"}},
		{From: "b.go", To: "d.go", Names: []string{"f"}},
		{From: "d.go", To: "a.go", Names: []string{"T", "T.V"}},
	})
	check("two-way files", r.TwoWayFiles, [][2]string{{"a.go", "b.go"}})
	check("largest", r.Largest, []string{"a.go", "b.go", "d.go"})
	check("sccs", r.SCCs, [][]string{{"a.go", "b.go", "d.go"}})
}

func TestPrint(t *testing.T) {
	r, err := measure(writePackage(t, tiny), "T")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.print(&b, false); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"T methods: 4 (2 methods + 2 functions taking *T)",
		"  not counted: 1 methods of other types taking *T",
		"  T -> E                                 2",
		"  E <-> T (1 / 2)",
		"two-way file pairs: 1",
		"  a.go <-> b.go",
		"largest set of files that all reach each other: 3 of 4",
		"  a.go b.go d.go",
	} {
		if !strings.Contains(b.String(), line+"\n") {
			t.Errorf("no line %q in\n%s", line, b.String())
		}
	}
	b.Reset()
	if err := r.print(&b, true); err != nil {
		t.Fatal(err)
	}
	if want := "  a.go -> c.go: E E.N I I.Do\n"; !strings.Contains(b.String(), want) {
		t.Errorf("-v: no line %q in\n%s", want, b.String())
	}
}

// TestJSON: -json round-trips the report.
func TestJSON(t *testing.T) {
	r, err := measure(writePackage(t, tiny), "T")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.writeJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, r) {
		t.Fatalf("JSON round trip:\n got %+v\nwant %+v", &back, r)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if tf := m["type"].(map[string]any); tf["total"] != 4.0 || tf["functions"] != 2.0 {
		t.Fatalf("type figure in JSON: %v", tf)
	}
}

// TestTypeError: a package that does not type-check is refused, not
// undercounted.
func TestTypeError(t *testing.T) {
	dir := writePackage(t, map[string]string{"a.go": "package p\n\nvar v = undefined\n"})
	if _, err := measure(dir, "T"); err == nil || !strings.Contains(err.Error(), "undefined") {
		t.Fatalf("err %v, want the type error", err)
	}
}

// TestNoType: a -type the package does not declare is reported as such.
func TestNoType(t *testing.T) {
	r, err := measure(writePackage(t, tiny), "Missing")
	if err != nil {
		t.Fatal(err)
	}
	if r.Type.Found || r.Type.Total != 0 {
		t.Fatalf("type figure %+v", r.Type)
	}
	var b bytes.Buffer
	if err := r.writeJSON(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "null") {
		t.Fatalf("JSON has null lists:\n%s", b.String())
	}
}
