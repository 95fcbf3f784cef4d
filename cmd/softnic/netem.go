package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/softnic/softnic/dataplane/impair"
	"github.com/softnic/softnic/verbs"
)

// netemCmd shows or changes a running daemon's receive impairment (softnic
// run --netem) over the control socket:
//
//	softnic netem [--socket S]                 print the Spec in force ("" for none)
//	softnic netem [--socket S] SPEC...         replace it; prints the Spec in force
//	softnic netem [--socket S] clear           remove it (so does an empty SPEC)
//
// The words may come as one quoted argument or several. They are parsed
// here first, so a mistake is a usage error (exit status 2) before the
// daemon is asked. Only root or the daemon's user may change the Spec.
func netemCmd(args []string) error { return netem(args, os.Stdout) }

// netem is netemCmd printing to out.
func netem(args []string, out io.Writer) error {
	flags := flag.NewFlagSet("netem", flag.ContinueOnError)
	socket := flags.String("socket", defaultSocket, "control socket of the daemon")
	flags.Usage = func() {
		fmt.Fprintln(flags.Output(), `usage: softnic netem [--socket PATH] ["SPEC" | clear]
  print, set or clear the daemon's receive impairment, in netem's words
  (e.g. "loss 1% delay 100us 20us reorder 2% duplicate 0.1% corrupt 0.01%";
  docs/impair.md)`)
		flags.PrintDefaults()
	}
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	text := strings.Join(flags.Args(), " ")
	show := flags.NArg() == 0
	if strings.TrimSpace(text) == "clear" {
		text = ""
	}
	if !show {
		if _, err := impair.Parse(text); err != nil {
			return usagef("%w", err)
		}
	}
	ctx, err := verbs.Dial(*socket)
	if err != nil {
		return err // one line: Dial says why
	}
	defer ctx.Close()
	var spec string
	if show {
		spec, err = ctx.Netem()
	} else {
		spec, err = ctx.SetNetem(text)
	}
	if err != nil {
		return fmt.Errorf("netem: %w", err)
	}
	if spec != "" {
		fmt.Fprintln(out, spec)
	}
	return nil
}
