package afxdp

import (
	"time"

	"github.com/softnic/softnic/dataplane/afxdp/doorbell"
)

// Group is a dataplane.Waiter over several ports, for a poll loop that
// serves them all (softnic switch): one ppoll over every socket of every
// port and one doorbell, so that a frame on any port, or Wake, ends the
// wait.
type Group struct {
	ports []*Port
	bell  *doorbell.Doorbell
}

// NewGroup returns a Group over ports, which stay the caller's (Close the
// Group before them).
func NewGroup(ports ...*Port) (*Group, error) {
	var fds []int
	for _, p := range ports {
		for _, x := range p.socks {
			fds = append(fds, x.fd)
		}
	}
	bell, err := doorbell.New(fds...)
	if err != nil {
		return nil, err
	}
	return &Group{ports: ports, bell: bell}, nil
}

// Wait blocks until a frame may have arrived on any port, Wake is called,
// or timeout passes; while the kernel holds back frames of a TX ring, at
// most txRetry (as Port.Wait).
func (g *Group) Wait(timeout time.Duration) {
	for _, p := range g.ports {
		for _, x := range p.socks {
			if x.txPending() {
				timeout = min(timeout, txRetry)
			}
		}
	}
	g.bell.Wait(timeout)
}

// Wake makes a current or the next Wait return at once; safe from any
// goroutine.
func (g *Group) Wake() { g.bell.Wake() }

// Watch makes Wait also wake when fd is written (doorbell.Watch).
func (g *Group) Watch(fd int) error { return g.bell.Watch(fd) }

// Unwatch undoes Watch.
func (g *Group) Unwatch(fd int) error { return g.bell.Unwatch(fd) }

// Close releases the doorbell; the poll loop must have stopped.
func (g *Group) Close() error { return g.bell.Close() }
