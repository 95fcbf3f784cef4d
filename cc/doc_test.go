package cc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocCC: docs/cc.md has a table row for every knob with its default
// as users write it, and names every counter.
func TestDocCC(t *testing.T) {
	doc, err := os.ReadFile("../docs/cc.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `") {
			key, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
			rows[key] = line
		}
	}
	for _, k := range Knobs() {
		if k.Owner == knobtest {
			continue
		}
		row, ok := rows[k.Key()]
		if !ok {
			t.Errorf("docs/cc.md: no row for knob %s", k.Key())
		} else if !strings.Contains(row, "`"+k.Default+"`") {
			t.Errorf("docs/cc.md: knob %s's row does not give its default `%s`: %s", k.Key(), k.Default, row)
		}
	}
	for _, c := range AllCounters() {
		if !strings.Contains(string(doc), "`"+c.Name+"`") {
			t.Errorf("docs/cc.md does not name counter %s", c.Name)
		}
	}
}

// TestTimelyOneFile: timely.go uses nothing that another file of the
// package declares unexported, so Timely is what an algorithm outside the
// package could be: one file on cc's exported API (issue 23: a second
// algorithm proves the seam is one file).
func TestTimelyOneFile(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	unexported := map[string]string{} // name: the file declaring it
	var timely *ast.File
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if name == "timely.go" {
			timely = f
			continue
		}
		for n, obj := range f.Scope.Objects {
			if !ast.IsExported(n) {
				unexported[n] = name + " (" + obj.Kind.String() + ")"
			}
		}
		for _, d := range f.Decls { // methods are not in the file scope
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil && !ast.IsExported(fd.Name.Name) {
				unexported["."+fd.Name.Name] = name + " (method)"
			}
		}
	}
	if timely == nil {
		t.Fatal("no timely.go")
	}
	for _, d := range timely.Decls { // its own methods may share a name
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil {
			delete(unexported, "."+fd.Name.Name)
		}
	}
	ast.Inspect(timely, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.Ident:
			if from, ok := unexported[x.Name]; ok && x.Obj == nil {
				t.Errorf("%v: timely.go uses %s from %s", fset.Position(x.Pos()), x.Name, from)
			}
		case *ast.SelectorExpr:
			if from, ok := unexported["."+x.Sel.Name]; ok {
				t.Errorf("%v: timely.go calls .%s, a method of %s", fset.Position(x.Pos()), x.Sel.Name, from)
			}
		}
		return true
	})
}
