// Command limitclient is the attacker of scripts/limits-demo.sh and
// TestLimitsDemo: one permitted client of a softnic daemon that tries to
// take the daemon for itself, the two ways issue 10 describes. It is a
// test tool, not an installed binary (it lives under tests/, not cmd/).
//
//  1. Connections: it dials the daemon's control socket (verbs.Dial)
//     until the daemon refuses, up to --conns times (unlimited, ~10,000
//     connections took all of the daemon's 20,000 descriptors), then makes
//     --retries more attempts to show they are refused too, and keeps the
//     connections it got.
//  2. Deep queues: on the first of those connections it creates --cqs
//     CQs of --cqe entries each (200 of 4 Mi took 33 GB of address space
//     and 695 MB resident); then, with --fill, as many CQs as the daemon
//     still accepts, halving the depth after each refusal; on the second
//     connection a small CQ and QPs of --qp-wr send and receive work
//     requests each, until refused. --deep-conns N repeats this on the
//     first N connections (the worst case is every connection the uid may
//     have).
//
// It prints what it got and every distinct error it met, one line each
// ("refused:" lines are the daemon's answer), then "holding ..." and waits
// until it is killed or gets SIGTERM/SIGINT, leaving without destroying
// anything: the daemon must clean up after it.
//
// Exit status: 0 after a signal when every refusal was a limit error
// (verbs.ErrLimit), 1 on any other error (including an attack that was
// not refused at all when --want-refusal is set), 2 on bad flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/softnic/softnic/verbs"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// errCount prints each distinct error once, with how often it recurred.
type errCount struct {
	prefix string
	seen   map[string]int
	order  []string
}

func (e *errCount) add(err error) {
	if e.seen == nil {
		e.seen = map[string]int{}
	}
	// The byte limits' message ends with what this connection holds and
	// asked for: one line per limit, not per request size.
	s, _, _ := strings.Cut(err.Error(), "; this connection holds")
	if e.seen[s] == 0 {
		e.order = append(e.order, s)
	}
	e.seen[s]++
}

func (e *errCount) print() {
	for _, s := range e.order {
		if n := e.seen[s]; n > 1 {
			fmt.Printf("%s: %s (x%d)\n", e.prefix, s, n)
		} else {
			fmt.Printf("%s: %s\n", e.prefix, s)
		}
	}
}

func run(args []string) int {
	fs := flag.NewFlagSet("limitclient", flag.ContinueOnError)
	socket := fs.String("socket", "/run/softnic/softnic.sock", "the daemon's control socket")
	maxConns := fs.Int("conns", 10000, "connections to try to open")
	retries := fs.Int("retries", 20, "further connection attempts after the first refusal")
	cqs := fs.Int("cqs", 200, "deep CQs to try to create per deep connection")
	cqe := fs.Int("cqe", 1<<22, "entries per deep CQ")
	qpWR := fs.Int("qp-wr", 1<<16, "send and receive work requests per QP")
	qps := fs.Int("qps", 20000, "QPs to try to create per deep connection")
	fill := fs.Bool("fill", true, "after the deep CQs, fill the connection with the deepest CQs the daemon still accepts")
	deepConns := fs.Int("deep-conns", 2, "connections to run the deep-queue attack on (CQs on odd-numbered, QPs on even-numbered ones)")
	wantRefusal := fs.Bool("want-refusal", true, "exit 1 if an attack is not refused")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "limitclient: no arguments expected")
		return 2
	}
	// Signals first, so the script's SIGTERM never meets the default action.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	status := 0
	fail := func(format string, a ...any) {
		fmt.Printf("FAIL: "+format+"\n", a...)
		status = 1
	}
	// refusal checks an error a limit should have produced.
	refusal := func(err error) {
		if !errors.Is(err, verbs.ErrLimit) {
			fail("not a limit error: %v", err)
		}
	}

	// Attack 1: connections.
	var ctxs []*verbs.Context
	connErrs := &errCount{prefix: "attack 1: refused"}
	var firstRefusal error
	for len(ctxs) < *maxConns {
		c, err := verbs.Dial(*socket)
		if err != nil {
			firstRefusal = err
			break
		}
		ctxs = append(ctxs, c)
	}
	if firstRefusal == nil {
		if *wantRefusal {
			fail("attack 1: %d connections opened and none refused", len(ctxs))
		}
	} else {
		fmt.Printf("attack 1: opened %d connections; connection %d: %v\n", len(ctxs), len(ctxs)+1, firstRefusal)
		refusal(firstRefusal)
		for range *retries {
			c, err := verbs.Dial(*socket)
			if err == nil {
				ctxs = append(ctxs, c)
				fail("attack 1: a connection after the refusal was accepted (%d open)", len(ctxs))
				continue
			}
			connErrs.add(err)
			refusal(err)
		}
		connErrs.print()
	}

	// Attack 2: deep queues on the first deep-conns connections.
	var heldCQs, heldCQE, heldQPs int
	for i := 0; i < *deepConns && i < len(ctxs); i++ {
		c := ctxs[i]
		tag := fmt.Sprintf("attack 2: connection %d", i+1)
		errs := &errCount{prefix: tag + ": refused"}
		if i%2 == 0 {
			ok, refused := 0, 0
			for range *cqs {
				if _, err := c.CreateCQ(*cqe); err != nil {
					errs.add(err)
					refusal(err)
					refused++
					continue
				}
				ok++
				heldCQE += *cqe
			}
			heldCQs += ok
			fmt.Printf("%s: %d of %d CQs of %d entries created, %d refused\n", tag, ok, *cqs, *cqe, refused)
			if refused == 0 && *wantRefusal {
				fail("%s: none of the deep CQs was refused", tag)
			}
			if *fill {
				n, entries := 0, 0
				for d := *cqe; d >= 1; {
					if _, err := c.CreateCQ(d); err != nil {
						errs.add(err)
						refusal(err)
						d /= 2
						continue
					}
					n++
					entries += d
				}
				heldCQs += n
				heldCQE += entries
				fmt.Printf("%s: then %d more CQs, %d entries in all, until the daemon refused even 1 entry\n", tag, n, entries)
			}
		} else {
			pd, err := c.AllocPD()
			if err != nil {
				fail("%s: alloc PD: %v", tag, err)
				continue
			}
			cq, err := c.CreateCQ(16)
			if err != nil {
				fail("%s: create CQ: %v", tag, err)
				continue
			}
			ok := 0
			for range *qps {
				if _, err := pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: *qpWR, MaxRecvWR: *qpWR}); err != nil {
					errs.add(err)
					refusal(err)
					break
				}
				ok++
			}
			heldQPs += ok
			fmt.Printf("%s: %d QPs of %d send and %d receive WRs created before a refusal\n", tag, ok, *qpWR, *qpWR)
			if ok == *qps && *wantRefusal {
				fail("%s: no QP was refused", tag)
			}
		}
		errs.print()
	}

	fmt.Printf("holding: %d connections, %d CQs (%d entries), %d QPs; pid %d\n", len(ctxs), heldCQs, heldCQE, heldQPs, os.Getpid())
	sig := <-sigs
	// Leave as a crashed client would: no Close, no Destroy; the kernel
	// closes the sockets and the daemon must release the rest.
	fmt.Printf("leaving on %v without cleaning up\n", sig)
	return status
}
