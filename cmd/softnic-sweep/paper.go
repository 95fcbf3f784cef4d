package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
)

// A paperPreset is one paper figure reproduced with the paper's own
// workload: `softnic-sweep paper <name>`. Each preset lives in a file of
// its own (paper_<paper>.go) and registers itself in that file's init.
type paperPreset struct {
	Name   string // the command-line name: <paper>-<figure>, e.g. "igbn-fig6a"
	Paper  string // the paper, as ../shared/papers names it: "Improved go-back-N (002)"
	Figure string // the figure it reproduces: "Fig. 6a"
	// What the figure shows, one line.
	Summary string
	// Params are the paper's parameters as the preset uses them, each with
	// where the paper gives it, or why softnic departs from it.
	Params []paperParam
	// Run runs the workload on the embedded fabric (o.Testbed false) or on
	// the two-host testbed, and writes its CSV and PNG into o.Out.
	Run func(o paperOpts) error
	// Testbed says whether the preset can run on the testbed at all.
	Testbed bool
	// TestbedNote says, in a sentence, how the figure runs on the
	// two-host testbed or why it does not (printed with the parameters).
	TestbedNote string
	// Seeds is the number of seeds the preset runs each point with by
	// default; 0: it takes no -seeds.
	Seeds int
}

// paperParam is one parameter of a preset: "message size", "4 MiB",
// "§5.1, non-pipelined".
type paperParam struct{ Name, Value, Source string }

// paperOpts are the flags every preset takes.
type paperOpts struct {
	Out     string // directory for the CSV and PNG
	Testbed bool   // run on the two-host testbed instead of the embedded fabric
	Quick   bool   // fewer points and shorter windows: a smoke run, not a figure
	Stdout  io.Writer
	Seeds   int // seeds per point (-seeds), for the presets that take it; 0: the preset's default
}

var paperPresets = map[string]paperPreset{}

// registerPaper adds a preset; a name registered twice is a programming
// error.
func registerPaper(p paperPreset) {
	if _, dup := paperPresets[p.Name]; dup {
		panic("softnic-sweep: paper preset " + p.Name + " registered twice")
	}
	paperPresets[p.Name] = p
}

// paperNames returns the preset names, sorted.
func paperNames() []string {
	ns := make([]string, 0, len(paperPresets))
	for n := range paperPresets {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// printPaperList writes one line per preset: name, paper, figure, summary.
func printPaperList(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "preset\tpaper\tfigure\twhat")
	for _, n := range paperNames() {
		p := paperPresets[n]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, p.Paper, p.Figure, p.Summary)
	}
	tw.Flush()
}

// printPaperParams writes a preset's parameters with their sources.
func printPaperParams(w io.Writer, p paperPreset) {
	fmt.Fprintf(w, " %s, %s: %s\n", p.Paper, p.Figure, p.Summary)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, pa := range p.Params {
		fmt.Fprintf(tw, "   %s\t%s\t%s\n", pa.Name, pa.Value, pa.Source)
	}
	tw.Flush()
	if p.TestbedNote != "" {
		fmt.Fprintf(w, "   testbed: %s\n", p.TestbedNote)
	}
}

const paperUsage = `usage: softnic-sweep paper [-list] <preset> [-out DIR] [-testbed] [-quick] [-params] [-seeds N]
  Reproduces one paper figure with the paper's own workload and prints the
  parameters it uses beside where the paper gives them. Without a preset
  (or with -list) it lists the presets.`

// paperCmd is `softnic-sweep paper`.
func paperCmd(args []string) error {
	if len(args) == 0 || args[0] == "-list" || args[0] == "--list" || args[0] == "list" {
		printPaperList(os.Stdout)
		return nil
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Println(paperUsage)
		printPaperList(os.Stdout)
		return nil
	}
	p, ok := paperPresets[args[0]]
	if !ok {
		return usagef("paper: no preset %q (have: %s)", args[0], strings.Join(paperNames(), ", "))
	}
	fs := flag.NewFlagSet("paper "+p.Name, flag.ContinueOnError)
	out := fs.String("out", "results", "directory for the preset's CSV and PNG")
	testbed := fs.Bool("testbed", false, "run on the two-host testbed (root, XDP) instead of the embedded fabric")
	quick := fs.Bool("quick", false, "fewer points, shorter windows: a smoke run, not the figure")
	params := fs.Bool("params", false, "print the parameters and exit")
	seeds := fs.Int("seeds", 0, "seeds per point, for the presets that run several (0: the preset's default)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("paper %s: unexpected argument %q", p.Name, fs.Arg(0))
	}
	if *seeds != 0 && p.Seeds == 0 {
		return usagef("paper %s: runs each point with one seed; -seeds is for the presets that run several", p.Name)
	}
	if *seeds < 0 {
		return usagef("paper %s: -seeds %d: want 1 or more", p.Name, *seeds)
	}
	printPaperParams(os.Stdout, p)
	if *params {
		return nil
	}
	if *testbed && !p.Testbed {
		return usagef("paper %s: runs on the embedded fabric only (%s): %s", p.Name, p.Figure, p.TestbedNote)
	}
	return p.Run(paperOpts{Out: *out, Testbed: *testbed, Quick: *quick, Stdout: os.Stdout, Seeds: *seeds})
}
