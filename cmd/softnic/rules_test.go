package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/softnic/softnic/dataplane/inject"
)

// TestRulesCommand: softnic rules prints a good file in canonical form,
// which reads back to the same rules; a malformed file, a missing one or
// a bad command line is one line on stderr and exit status 2.
func TestRulesCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good.json", `{"rules": [
		{"name": "drop-retx", "match": {"kind": "data", "opcode": 7}, "packet": {"psn_offset": 5, "iteration": 2}, "action": "drop"},
		{"name": "late", "match": {"kind": "ack"}, "packet": {"nth": 1}, "action": "delay", "delay": "100us"}]}`)
	var stdout, stderr strings.Builder
	if code := exitStatus(rulesCmd([]string{good}, &stdout, &stderr), &stderr); code != 0 || stderr.Len() != 0 {
		t.Fatalf("good file: exit %d, stderr %q", code, stderr.String())
	}
	want := `{"rules": [
  {"name":"drop-retx","match":{"kind":"data","opcode":"RC_RDMA_WRITE_MIDDLE"},"packet":{"psn_offset":5,"iteration":2},"action":"drop","count":1},
  {"name":"late","match":{"kind":"ack"},"packet":{"nth":1},"action":"delay","delay":"100µs","count":1}
]}
`
	if stdout.String() != want {
		t.Fatalf("printed\n%s\nwant\n%s", stdout.String(), want)
	}
	if _, err := inject.Parse([]byte(stdout.String())); err != nil {
		t.Fatalf("the canonical form does not parse: %v", err)
	}

	bad := write("rules.json", `{"rules": [
		{"name": "a", "packet": {"nth": 1}, "action": "drop"},
		{"name": "b", "packet": {"nth": 2}, "action": "drop"},
		{"name": "late", "match": {"kind": "ack"}, "packet": {"nth": 1}, "action": "dealy", "delay": "100us"}]}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{bad}, `softnic: rules: ` + bad + `: rule 2 ("late"): action "dealy": want drop, ecn, corrupt, delay or duplicate`},
		{[]string{write("nopos.json", `{"rules": [{"name": "x", "packet": {}, "action": "drop"}]}`)}, `rule 0 ("x"): packet: missing: want nth or psn_offset`},
		{[]string{write("junk.json", `{"rules": [{"name": "x", "packet": {"nth": 1}, "action": "drop", "extra": true}]}`)}, `rule 0 ("x"): unknown field "extra"`},
		{[]string{write("notjson.json", `rules: []`)}, `not JSON at byte 1`},
		{[]string{filepath.Join(dir, "absent.json")}, `absent.json: no such file or directory`},
		{nil, `softnic: rules: want one FILE, e.g. softnic rules rules.json`},
		{[]string{good, bad}, `softnic: rules: want one FILE`},
	} {
		var stdout, stderr strings.Builder
		code := exitStatus(rulesCmd(c.args, &stdout, &stderr), &stderr)
		if code != 2 || stdout.Len() != 0 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("softnic rules %q: exit %d, stdout %q, stderr %q; want 2 and one line with %q", c.args, code, stdout.String(), stderr.String(), c.want)
		}
	}
}
