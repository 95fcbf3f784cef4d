package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/softnic/softnic/dataplane/inject"
)

// rulesCmd checks an event-injection rule file (package inject's format)
// and prints its rules in canonical form: `softnic rules FILE`. A file
// that does not parse is a one-line error naming the file, the rule and
// the field, and exit status 2.
func rulesCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rules", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: softnic rules FILE

Checks FILE, a rule file of deterministic event injection (drop, ecn,
corrupt, delay or duplicate one named packet at a switch; go doc
github.com/softnic/softnic/dataplane/inject), and prints its rules in
canonical form: every default spelt out, opcodes by name.`)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("rules: want one FILE, e.g. softnic rules rules.json")
	}
	set, err := inject.LoadFile(fs.Arg(0))
	if err != nil {
		return usageError{fmt.Errorf("rules: %w", err)}
	}
	_, err = io.WriteString(stdout, set.String())
	return err
}
