// Command coupling measures how one Go package's code depends on itself:
// the methods of each type, the calls between its types, and the uses
// between its files. It reads the package's non-test files that build on
// this machine (go/build; a package with cgo files is refused) and
// type-checks them with go/types, importing dependencies from source; a
// type error stops it, since a half-checked package would undercount.
//
// Methods per type. For every named type declared at the package's top
// level: the methods declared with receiver T or *T (promoted methods of
// embedded fields are not counted); for an interface type, the methods of
// its method set. For the type given by -type (default Engine), the
// figure the project quotes, in which a function whose parameters include
// the type counts as one of its methods: its methods plus the
// package-level functions (declared without a receiver) with a parameter
// of type T, *T, ...T or ...*T, each function counted once. Methods of
// other types that take such a parameter are counted on a line of their
// own and are not in the figure.
//
// Calls between types. A call site is one call expression, inside a
// method of type A (function literals in it included), whose callee is a
// method of type B, both of them this package's named types and A != B.
// The callee's type is the type that declares the method, as go/types
// resolves the selector: a method promoted through an embedded field
// counts as a call to the embedded type, and a call of an interface's
// method as a call to the interface type (not to its implementations).
// Method values that are not called, calls in package-level functions,
// and calls of other packages' methods are not counted. Printed: the
// (A, B) pairs by number of call sites, and the pairs that call both ways.
//
// Files. File A uses file B when an identifier in A's code denotes a
// top-level declaration of B (a type, function, variable or constant) or
// a method declared in B, named Type.Method: a call or method value of a
// method declared in B, also through embedding (promotion) or through an
// interface declared in B, is a use of B. A method is resolved by its
// receiver's type, not matched by name: cfg.Addr, a field of Config, is
// not a use of the file declaring Engine.Addr. Fields are not top-level
// declarations: naming a field is not a use of the file declaring its
// struct. Names in comments, in test files, and a function's own type
// parameters and locals are not uses. Printed: the pairs of files that
// use each other both ways, and the largest set of files that all reach
// each other (a strongly connected component), with every set of more
// than one file.
//
//	go run ./internal/tools/coupling [-type Engine] [-v] [-json] ./dataplane
//
// Without -v it prints the ten types with most methods and the ten pairs
// of types with most call sites; -v lists every type with methods, every
// call pair, the functions and other types' methods behind the -type
// figure, and each file edge with the names that make it. -json prints
// all of it, with the types of no methods, as one JSON object.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

func main() {
	typeName := flag.String("type", "Engine", "the type whose methods, with the functions taking it, make the quoted figure")
	verbose := flag.Bool("v", false, "list every type, call pair, and file edge with the names that make it")
	asJSON := flag.Bool("json", false, "print all the figures as JSON")
	flag.Parse()
	dir := "."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	r, err := measure(dir, *typeName)
	if err != nil {
		fmt.Fprintln(os.Stderr, "coupling:", err)
		os.Exit(1)
	}
	if *asJSON {
		err = r.writeJSON(os.Stdout)
	} else {
		err = r.print(os.Stdout, *verbose)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "coupling:", err)
		os.Exit(1)
	}
}

// report is what measure finds; its JSON form is the -json output.
type report struct {
	Package string   `json:"package"`
	Files   []string `json:"files"`
	Lines   int      `json:"lines"`

	Type           typeFigure  `json:"type"`
	MethodsPerType []typeCount `json:"methods_per_type"` // most methods first, then by name

	Calls       []callPair `json:"calls"`         // most call sites first, then by names
	TwoWayTypes []typePair `json:"two_way_types"` // by names

	FileEdges   []fileEdge  `json:"file_edges"`    // by file names
	TwoWayFiles [][2]string `json:"two_way_files"` // by file names
	Largest     []string    `json:"largest_scc"`   // sorted
	SCCs        [][]string  `json:"sccs"`          // components of more than one file, largest first
}

// typeFigure is the quoted figure of one type T: Total = Methods +
// Functions.
type typeFigure struct {
	Name         string   `json:"name"`
	Found        bool     `json:"found"`
	Total        int      `json:"total"`
	Methods      int      `json:"methods"`
	Functions    int      `json:"functions"`     // package-level functions with a T or *T parameter
	FunctionList []string `json:"function_list"` // sorted
	// OtherMethods are other types' methods with a T or *T parameter,
	// as Type.Method; not in Total.
	OtherMethods    int      `json:"other_methods"`
	OtherMethodList []string `json:"other_method_list"` // sorted
}

type typeCount struct {
	Type      string `json:"type"`
	Methods   int    `json:"methods"`
	Interface bool   `json:"interface,omitempty"`
}

// callPair: Sites call expressions in methods of From call methods of To.
type callPair struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Sites int    `json:"sites"`
}

// typePair: A's methods call B's at AToB sites, B's call A's at BToA; A < B.
type typePair struct {
	A    string `json:"a"`
	B    string `json:"b"`
	AToB int    `json:"a_to_b"`
	BToA int    `json:"b_to_a"`
}

// fileEdge: From uses To through Names (Type.Method for a method).
type fileEdge struct {
	From  string   `json:"from"`
	To    string   `json:"to"`
	Names []string `json:"names"`
}

// load parses and type-checks the package in dir: the non-test files
// that build on this machine (go/build), no cgo.
func load(dir string) (*token.FileSet, []*ast.File, *types.Package, *types.Info, error) {
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if len(bp.CgoFiles) > 0 {
		return nil, nil, nil, nil, fmt.Errorf("%s: cgo files are not supported (%s)", dir, strings.Join(bp.CgoFiles, " "))
	}
	fset := token.NewFileSet()
	names := slices.Sorted(slices.Values(bp.GoFiles))
	var files []*ast.File
	for _, n := range names {
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		files = append(files, f)
	}
	var errs []error
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "source", nil),
		Error:    func(err error) { errs = append(errs, err) },
	}
	info := &types.Info{
		Defs:       map[*ast.Ident]types.Object{},
		Uses:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}
	path := bp.ImportPath
	if path == "." {
		path = bp.Name
	}
	pkg, _ := conf.Check(path, fset, files, info)
	if len(errs) > 0 {
		return nil, nil, nil, nil, fmt.Errorf("type-checking %s: %w", dir, errors.Join(errs...))
	}
	return fset, files, pkg, info, nil
}

func measure(dir, typeName string) (*report, error) {
	fset, files, pkg, info, err := load(dir)
	if err != nil {
		return nil, err
	}
	r := &report{Package: pkg.Name()}
	base := func(p token.Pos) string { return filepath.Base(fset.Position(p).Filename) }
	for _, f := range files {
		r.Files = append(r.Files, base(f.Pos()))
		r.Lines += fset.File(f.Pos()).LineCount()
	}

	named := map[*types.TypeName]bool{} // the package's named types
	for _, n := range pkg.Scope().Names() {
		if tn, ok := pkg.Scope().Lookup(n).(*types.TypeName); ok && !tn.IsAlias() {
			named[tn] = true
		}
	}
	// recvType is the package type that declares method fn, or nil: for
	// a method of a named interface, go/types gives the named type as
	// the receiver.
	recvType := func(fn *types.Func) *types.TypeName {
		sig, _ := fn.Type().(*types.Signature)
		if sig == nil || sig.Recv() == nil {
			return nil
		}
		t := types.Unalias(sig.Recv().Type())
		if p, ok := t.(*types.Pointer); ok {
			t = types.Unalias(p.Elem())
		}
		if n, ok := t.(*types.Named); ok && named[n.Origin().Obj()] {
			return n.Origin().Obj()
		}
		return nil
	}
	methodName := func(fn *types.Func) string {
		if tn := recvType(fn); tn != nil {
			return tn.Name() + "." + fn.Name()
		}
		return fn.Name()
	}

	r.methodsPerType(named)
	r.typeFigure(files, info, pkg, typeName, recvType, methodName)
	r.calls(files, info, recvType)
	r.fileGraph(info, pkg, base, methodName)
	// Empty lists, not nil, so that -json prints [] rather than null.
	for _, l := range []*[]string{&r.Type.FunctionList, &r.Type.OtherMethodList} {
		*l = nonNil(*l)
	}
	r.Calls, r.TwoWayTypes, r.FileEdges = nonNil(r.Calls), nonNil(r.TwoWayTypes), nonNil(r.FileEdges)
	r.TwoWayFiles, r.SCCs = nonNil(r.TwoWayFiles), nonNil(r.SCCs)
	return r, nil
}

func nonNil[S ~[]E, E any](s S) S {
	if s == nil {
		return S{}
	}
	return s
}

// methodsPerType counts each named type's methods.
func (r *report) methodsPerType(named map[*types.TypeName]bool) {
	for tn := range named {
		c := typeCount{Type: tn.Name()}
		if it, ok := tn.Type().Underlying().(*types.Interface); ok {
			c.Methods, c.Interface = it.NumMethods(), true
		} else if n, ok := tn.Type().(*types.Named); ok {
			c.Methods = n.NumMethods()
		}
		r.MethodsPerType = append(r.MethodsPerType, c)
	}
	sort.Slice(r.MethodsPerType, func(i, j int) bool {
		a, b := r.MethodsPerType[i], r.MethodsPerType[j]
		if a.Methods != b.Methods {
			return a.Methods > b.Methods
		}
		return a.Type < b.Type
	})
}

// typeFigure counts the methods of typeName and the functions, and other
// types' methods, that take it as a parameter.
func (r *report) typeFigure(files []*ast.File, info *types.Info, pkg *types.Package, typeName string,
	recvType func(*types.Func) *types.TypeName, methodName func(*types.Func) string) {
	r.Type.Name = typeName
	tn, ok := pkg.Scope().Lookup(typeName).(*types.TypeName)
	if !ok {
		return
	}
	r.Type.Found = true
	for _, c := range r.MethodsPerType {
		if c.Type == typeName {
			r.Type.Methods = c.Methods
		}
	}
	isT := func(t types.Type) bool {
		t = types.Unalias(t)
		if p, ok := t.(*types.Pointer); ok {
			t = types.Unalias(p.Elem())
		}
		n, ok := t.(*types.Named)
		return ok && n.Origin().Obj() == tn
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			fn, ok := info.Defs[fd.Name].(*types.Func)
			if !ok {
				continue
			}
			sig := fn.Type().(*types.Signature)
			takes := false
			for p := range sig.Params().Variables() {
				t := p.Type()
				if s, ok := t.(*types.Slice); ok && sig.Variadic() && p == sig.Params().At(sig.Params().Len()-1) {
					t = s.Elem()
				}
				takes = takes || isT(t)
			}
			switch {
			case !takes:
			case sig.Recv() == nil:
				r.Type.FunctionList = append(r.Type.FunctionList, fn.Name())
			case recvType(fn) != tn:
				r.Type.OtherMethodList = append(r.Type.OtherMethodList, methodName(fn))
			}
		}
	}
	sort.Strings(r.Type.FunctionList)
	sort.Strings(r.Type.OtherMethodList)
	r.Type.Functions = len(r.Type.FunctionList)
	r.Type.OtherMethods = len(r.Type.OtherMethodList)
	r.Type.Total = r.Type.Methods + r.Type.Functions
}

// calls counts the call sites in each type's methods that call another
// type's methods.
func (r *report) calls(files []*ast.File, info *types.Info, recvType func(*types.Func) *types.TypeName) {
	sites := map[[2]string]int{}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || fd.Body == nil {
				continue
			}
			fn, _ := info.Defs[fd.Name].(*types.Func)
			if fn == nil {
				continue
			}
			from := recvType(fn)
			if from == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
				if !ok {
					return true
				}
				s := info.Selections[sel]
				if s == nil || (s.Kind() != types.MethodVal && s.Kind() != types.MethodExpr) {
					return true
				}
				m, _ := s.Obj().(*types.Func)
				if m == nil {
					return true
				}
				if to := recvType(m); to != nil && to != from {
					sites[[2]string{from.Name(), to.Name()}]++
				}
				return true
			})
		}
	}
	for k, n := range sites {
		r.Calls = append(r.Calls, callPair{From: k[0], To: k[1], Sites: n})
		if back := sites[[2]string{k[1], k[0]}]; back > 0 && k[0] < k[1] {
			r.TwoWayTypes = append(r.TwoWayTypes, typePair{A: k[0], B: k[1], AToB: n, BToA: back})
		}
	}
	sort.Slice(r.Calls, func(i, j int) bool {
		a, b := r.Calls[i], r.Calls[j]
		if a.Sites != b.Sites {
			return a.Sites > b.Sites
		}
		if a.From != b.From {
			return a.From < b.From
		}
		return a.To < b.To
	})
	sort.Slice(r.TwoWayTypes, func(i, j int) bool {
		a, b := r.TwoWayTypes[i], r.TwoWayTypes[j]
		if a.A != b.A {
			return a.A < b.A
		}
		return a.B < b.B
	})
}

// fileGraph builds the file graph and its two-way pairs and strongly
// connected components.
func (r *report) fileGraph(info *types.Info, pkg *types.Package, base func(token.Pos) string, methodName func(*types.Func) string) {
	edges := map[string]map[string]map[string]bool{} // from -> to -> names
	for id, obj := range info.Uses {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		name := obj.Name()
		if fn, ok := obj.(*types.Func); ok && fn.Type().(*types.Signature).Recv() != nil {
			name = methodName(fn)
		} else if obj.Parent() != pkg.Scope() {
			continue // a local, a parameter, a type parameter, a field, a label
		}
		from, to := base(id.Pos()), base(obj.Pos())
		if from == to {
			continue
		}
		if edges[from] == nil {
			edges[from] = map[string]map[string]bool{}
		}
		if edges[from][to] == nil {
			edges[from][to] = map[string]bool{}
		}
		edges[from][to][name] = true
	}
	for _, a := range r.Files {
		for _, b := range r.Files {
			if e := edges[a][b]; e != nil {
				r.FileEdges = append(r.FileEdges, fileEdge{From: a, To: b, Names: slices.Sorted(maps.Keys(e))})
			}
			if a < b && edges[a][b] != nil && edges[b][a] != nil {
				r.TwoWayFiles = append(r.TwoWayFiles, [2]string{a, b})
			}
		}
	}
	sccs := components(r.Files, edges)
	r.Largest = sccs[0]
	for _, c := range sccs {
		if len(c) > 1 {
			r.SCCs = append(r.SCCs, c)
		}
	}
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// topTypes is how many types and call pairs print without -v.
const topTypes = 10

func (r *report) print(out io.Writer, verbose bool) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("package %s: %d non-test files, %d lines\n", r.Package, len(r.Files), r.Lines)

	t := r.Type
	if !t.Found {
		p("%s: no such type\n", t.Name)
	} else {
		p("%s methods: %d (%d methods + %d functions taking *%s)\n", t.Name, t.Total, t.Methods, t.Functions, t.Name)
		p("  not counted: %d methods of other types taking *%s\n", t.OtherMethods, t.Name)
		if verbose {
			p("  functions: %s\n", strings.Join(t.FunctionList, " "))
			p("  methods of other types: %s\n", strings.Join(t.OtherMethodList, " "))
		}
	}

	var withMethods []typeCount
	for _, c := range r.MethodsPerType {
		if c.Methods > 0 {
			withMethods = append(withMethods, c)
		}
	}
	shown := withMethods
	if !verbose && len(shown) > topTypes {
		shown = shown[:topTypes]
	}
	p("methods per type: %d types with methods (of %d)", len(withMethods), len(r.MethodsPerType))
	if len(shown) < len(withMethods) {
		p(", top %d", len(shown))
	}
	p("\n")
	for _, c := range shown {
		kind := ""
		if c.Interface {
			kind = " (interface)"
		}
		p("  %-20s %4d%s\n", c.Type, c.Methods, kind)
	}

	calls := r.Calls
	if !verbose && len(calls) > topTypes {
		calls = calls[:topTypes]
	}
	p("calls between types: %d pairs (type A's methods -> type B's, call sites)", len(r.Calls))
	if len(calls) < len(r.Calls) {
		p(", top %d", len(calls))
	}
	p("\n")
	for _, c := range calls {
		p("  %-35s %4d\n", c.From+" -> "+c.To, c.Sites)
	}
	p("two-way type pairs: %d\n", len(r.TwoWayTypes))
	for _, c := range r.TwoWayTypes {
		p("  %s <-> %s (%d / %d)\n", c.A, c.B, c.AToB, c.BToA)
	}

	p("two-way file pairs: %d\n", len(r.TwoWayFiles))
	for _, c := range r.TwoWayFiles {
		p("  %s <-> %s\n", c[0], c[1])
	}
	p("largest set of files that all reach each other: %d of %d\n", len(r.Largest), len(r.Files))
	for _, c := range r.SCCs {
		p("  %s\n", strings.Join(c, " "))
	}
	if verbose {
		p("file edges: %d\n", len(r.FileEdges))
		for _, e := range r.FileEdges {
			p("  %s -> %s: %s\n", e.From, e.To, strings.Join(e.Names, " "))
		}
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// components returns the strongly connected components of the file
// graph (Tarjan), each sorted, largest first, then by first name.
func components(names []string, edges map[string]map[string]map[string]bool) [][]string {
	index := map[string]int{}
	low := map[string]int{}
	on := map[string]bool{}
	var stack []string
	var out [][]string
	next := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		on[v] = true
		var tos []string
		for w := range edges[v] {
			tos = append(tos, w)
		}
		sort.Strings(tos)
		for _, w := range tos {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var c []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				c = append(c, w)
				if w == v {
					break
				}
			}
			sort.Strings(c)
			out = append(out, c)
		}
	}
	for _, n := range names {
		if _, seen := index[n]; !seen {
			visit(n)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i][0] < out[j][0]
	})
	return out
}
