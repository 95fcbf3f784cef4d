// Command coupling measures how the files of one Go package depend on
// each other: file A uses file B when A's code names a top-level
// declaration or a method that B defines. It prints, for the package's
// non-test files, the pairs of files that use each other both ways, the
// largest set of files that all reach each other (a strongly connected
// component), the method count of one type, and the non-test lines.
// It reads the non-test files that build on this machine (go/build; a
// package with cgo files is refused) and type-checks them, importing
// dependencies from source; a type error stops it, since a half-checked
// package would undercount.
//
//	go run ./internal/tools/coupling [-type Engine] ./dataplane
package main

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

func main() {
	typeName := flag.String("type", "Engine", "count the methods of this type")
	verbose := flag.Bool("v", false, "list every edge with the names that make it")
	flag.Parse()
	dir := "."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	if err := run(dir, *typeName, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "coupling:", err)
		os.Exit(1)
	}
}

// report is what run measures.
type report struct {
	name    string
	files   []string
	lines   int
	methods int
	twoWay  []string   // "a.go <-> b.go"
	sccs    [][]string // largest first
	largest int
	edges   map[string]map[string]map[string]bool
}

func run(dir, typeName string, verbose bool) error {
	r, err := measure(dir, typeName)
	if err != nil {
		return err
	}
	r.print(typeName, verbose)
	return nil
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
	name := pkg.Name()

	base := func(p token.Pos) string { return filepath.Base(fset.Position(p).Filename) }
	lines := 0
	var names []string
	for _, f := range files {
		names = append(names, base(f.Pos()))
		lines += fset.File(f.Pos()).LineCount()
	}
	// counted reports whether a use of obj counts: a package-level
	// name, or a method, of this package.
	counted := func(obj types.Object) bool {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			return false
		}
		if obj.Parent() == pkg.Scope() {
			return true
		}
		fn, ok := obj.(*types.Func)
		return ok && fn.Type().(*types.Signature).Recv() != nil
	}
	edges := map[string]map[string]map[string]bool{} // from -> to -> names
	add := func(from string, obj types.Object) {
		if !counted(obj) {
			return
		}
		to := base(obj.Pos())
		if to == from {
			return
		}
		if edges[from] == nil {
			edges[from] = map[string]map[string]bool{}
		}
		if edges[from][to] == nil {
			edges[from][to] = map[string]bool{}
		}
		edges[from][to][obj.Name()] = true
	}
	for id, obj := range info.Uses {
		add(base(id.Pos()), obj)
	}
	for sel, s := range info.Selections {
		add(base(sel.Pos()), s.Obj())
	}

	var twoWay []string
	for _, a := range names {
		for _, b := range names {
			if a < b && edges[a][b] != nil && edges[b][a] != nil {
				twoWay = append(twoWay, a+" <-> "+b)
			}
		}
	}
	sccs := components(names, edges)
	largest := 0
	for _, c := range sccs {
		largest = max(largest, len(c))
	}
	methods := 0
	if obj, ok := pkg.Scope().Lookup(typeName).(*types.TypeName); ok {
		if n, ok := obj.Type().(*types.Named); ok {
			methods = n.NumMethods()
		}
	}
	return &report{name: name, files: names, lines: lines, methods: methods, twoWay: twoWay, sccs: sccs, largest: largest, edges: edges}, nil
}

func (r *report) print(typeName string, verbose bool) {
	name, names, lines, methods, twoWay, sccs, largest, edges := r.name, r.files, r.lines, r.methods, r.twoWay, r.sccs, r.largest, r.edges
	fmt.Printf("package %s: %d non-test files, %d lines\n", name, len(names), lines)
	fmt.Printf("%s methods: %d\n", typeName, methods)
	fmt.Printf("two-way file pairs: %d\n", len(twoWay))
	for _, p := range twoWay {
		fmt.Println("  " + p)
	}
	fmt.Printf("largest set of files that all reach each other: %d\n", largest)
	for _, c := range sccs {
		if len(c) > 1 {
			fmt.Printf("  %s\n", strings.Join(c, " "))
		}
	}
	if verbose {
		for _, a := range names {
			for _, b := range names {
				if e := edges[a][b]; e != nil {
					var ns []string
					for n := range e {
						ns = append(ns, n)
					}
					sort.Strings(ns)
					fmt.Printf("%s -> %s: %s\n", a, b, strings.Join(ns, " "))
				}
			}
		}
	}
}

// components returns the strongly connected components of the file
// graph (Tarjan), each sorted, largest first.
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
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}
