//go:build linux

package main

import (
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/softnic/softnic/internal/conform"
	"github.com/softnic/softnic/recovery"
)

// repsFor is -reps-for SCHEMES:CASES=N, repeatable: N repetitions for
// those schemes and cases (comma lists, or all).
type repsFor []struct {
	schemes, cases []string
	n              int
}

func (r *repsFor) String() string { return fmt.Sprint(len(*r)) }

func (r *repsFor) Set(v string) error {
	sel, n, ok := strings.Cut(v, "=")
	schemes, cases, ok2 := strings.Cut(sel, ":")
	reps, err := strconv.Atoi(n)
	if !ok || !ok2 || err != nil || reps < 1 {
		return fmt.Errorf("want SCHEMES:CASES=N (comma lists or all), e.g. gbn,irn:write-drop-middle=20")
	}
	*r = append(*r, struct {
		schemes, cases []string
		n              int
	}{strings.Split(schemes, ","), strings.Split(cases, ","), reps})
	return nil
}

func (r repsFor) reps(scheme, c string, def int) int {
	for _, x := range r {
		if (slices.Contains(x.schemes, "all") || slices.Contains(x.schemes, scheme)) && (slices.Contains(x.cases, "all") || slices.Contains(x.cases, c)) {
			def = x.n
		}
	}
	return def
}

// conformTestbed is softnic-sweep conform -testbed: the suite on the
// two-host namespace testbed through softnic switch, judged by the same
// checks as on the fabric, each case repeated.
func conformTestbed(schemes []string, caseName string, reps int, more repsFor, shift uint, softnic, keep, jsonOut string, seed uint64) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("conform -testbed: needs root (network namespaces, XDP, AF_XDP)")
	}
	if len(schemes) == 0 {
		schemes = recovery.Names()
	}
	var plan []conform.TestbedPlan
	for _, s := range schemes {
		for _, c := range conform.Cases() {
			if caseName == "" || c.Name == caseName {
				plan = append(plan, conform.TestbedPlan{Scheme: s, Case: c, Reps: more.reps(s, c.Name, reps)})
			}
		}
	}
	script, err := conform.TestbedScript()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "softnic-conform.")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := conform.FindSoftnic(softnic, dir)
	if err != nil {
		return err
	}
	prefix := fmt.Sprintf("sncf%x", os.Getpid()&0xffffff)
	fmt.Fprintf(os.Stderr, "testbed %s up (%s)\n", prefix, script)
	hosts, down, err := conform.UpTestbed(script, prefix)
	if err != nil {
		return err
	}
	defer down()
	// An interrupt still removes the testbed: the runner's processes
	// get SIGTERM from the shell's process group, and down runs.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		<-sigs
		down()
		os.RemoveAll(dir)
		os.Exit(130)
	}()
	runs := 0
	for _, p := range plan {
		runs += p.Reps
	}
	fmt.Fprintf(os.Stderr, "%d schemes, %d scheme-cases, %d runs\n", len(schemes), len(plan), runs)
	r := &conform.TestbedRunner{Hosts: hosts, Softnic: bin, Dir: dir, TimerShift: uint8(shift), Log: os.Stderr, KeepFailed: keep}
	res, err := conform.RunTestbedSuite(r, plan, seed)
	if err != nil {
		return err
	}
	if err := res.WriteTables(os.Stdout); err != nil {
		return err
	}
	if jsonOut != "" {
		return writeJSONFile(jsonOut, res.WriteJSON)
	}
	return nil
}
