// Package cm sets up reliable-connected queue pairs between two hosts the
// way perftest does: each side creates its QPs, the two exchange what the
// other needs to address them over a TCP connection (QPN, initial PSN,
// GID and MAC, the rkey, address and size of the buffer to target, and the
// loss-recovery schemes they support), and each side then moves its own
// QPs INIT -> RTR -> RTS towards the peer's. RDMA CM would do the same over
// the fabric itself; a side channel keeps softnic's NIC free of any
// connection protocol and is what perftest users know.
//
// The exchange is symmetric, so that neither side needs to know whether it
// dialled or accepted: both send, then both receive (Exchange). Sync is the
// same swap carrying an opaque payload, used as a barrier ("my QPs are in
// RTR, you may send") and to hand a report back at the end of a run.
//
// The recovery scheme is agreed from the two lists (AgreeScheme); each
// side applies it to its QPs before connecting them, while they are still
// in RESET (verbs.QP.SetScheme, or QPInitAttr.Scheme when a side creates
// its QPs knowing it). ConnectQP does not apply it itself: an endpoint
// without a scheme list would otherwise force the fallback on a QP.
//
// StaR's stateless mode (docs/star.md): each endpoint carries its QP's
// role and a server's endpoint its memory table; ConnectQP refuses roles
// that do not pair (AgreeStar) and installs the server's table on a
// client QP before RTS. A program checks the roles right after the
// exchange (AgreeStar) to fail before touching its QPs.
package cm

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/softnic/softnic/qp"
	"github.com/softnic/softnic/verbs"
)

// Endpoint is what one side tells the other about one of its QPs.
type Endpoint struct {
	QPN     uint32
	PSN     qp.PSN     // initial send PSN of this side: the peer's expected PSN
	GID     netip.Addr // RoCEv2 GID as an IP address, IPv4 or IPv6
	MAC     [6]byte    // the port's own MAC (see NextHopMAC for routed paths)
	RKey    uint32     // rkey of the buffer below
	Addr    uint64     // buffer address the peer may target
	Size    uint64     // buffer size in bytes
	Schemes []string
	// Star is the QP's StaR role (verbs.QPInitAttr.Star): a stateless
	// server pairs only with a StaR client and the other way round
	// (AgreeStar).
	Star verbs.StarRole
	// StarTable is a StaR server's memory table (verbs.QP.StarTable),
	// which its client's QP installs before RTS (ConnectQP); empty from
	// any other role.
	StarTable []verbs.StarRegion
}

// ErrStarRoles is the error of two StaR roles that do not pair.
var ErrStarRoles = errors.New("cm: StaR roles do not pair")

// AgreeStar checks the two sides' StaR roles as AgreeScheme agrees on a
// scheme: a stateless server pairs only with a StaR client, a client only
// with a server, and an ordinary QP only with an ordinary QP. Any other
// pairing fails with an error naming both roles.
func AgreeStar(local, remote verbs.StarRole) error {
	ok := local == verbs.StarNone && remote == verbs.StarNone ||
		local == verbs.StarServer && remote == verbs.StarClient ||
		local == verbs.StarClient && remote == verbs.StarServer
	if !ok {
		return fmt.Errorf("%w: this side %v, the peer %v", ErrStarRoles, local, remote)
	}
	return nil
}

// FallbackScheme is what two sides without a common scheme use: plain
// go-back-N, which every RoCEv2 NIC speaks.
const FallbackScheme = "gbn"

// RandomPSN returns a random 24-bit initial PSN, as perftest picks with
// lrand48 (a fixed starting PSN would let a stale packet of an earlier
// connection land in the new one's window).
func RandomPSN() qp.PSN {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return qp.PSN(binary.BigEndian.Uint32(b[:]) & qp.PSNMask)
}

// Exchange sends local to the peer and returns the peer's endpoints, one
// per local endpoint (both sides must use the same number of QPs). Both
// sides send before they receive, so it works on synchronous connections
// such as net.Pipe as well as on TCP. Deadlines set on conn apply; after
// an error the connection is in an unknown state and should be closed.
func Exchange(conn net.Conn, local []Endpoint) ([]Endpoint, error) {
	msg, err := Marshal(local)
	if err != nil {
		return nil, err
	}
	vers, typ, body, err := swap(conn, msg)
	if err != nil {
		return nil, fmt.Errorf("cm: exchange: %w", err)
	}
	if typ != typeEndpoints {
		return nil, fmt.Errorf("cm: exchange: %w: peer sent a sync message where its endpoints were expected (do both sides run the same test?)", ErrMalformed)
	}
	remote, err := decodeEndpoints(body, vers)
	if err != nil {
		return nil, fmt.Errorf("cm: exchange: %w", err)
	}
	if len(remote) != len(local) {
		return nil, fmt.Errorf("cm: exchange: peer has %d QPs, this side %d (use the same -q on both sides)", len(remote), len(local))
	}
	return remote, nil
}

// Sync is a barrier that also swaps a payload of at most MaxBody bytes:
// it returns once the peer called Sync too, with the peer's payload.
func Sync(conn net.Conn, payload []byte) ([]byte, error) {
	if len(payload) > MaxBody {
		return nil, fmt.Errorf("%w: sync payload of %d bytes, at most %d", ErrTooLarge, len(payload), MaxBody)
	}
	msg := appendHeader(make([]byte, 0, HeaderLen+len(payload)), 1, typeSync, len(payload))
	msg = append(msg, payload...)
	_, typ, body, err := swap(conn, msg)
	if err != nil {
		return nil, fmt.Errorf("cm: sync: %w", err)
	}
	if typ != typeSync {
		return nil, fmt.Errorf("cm: sync: %w: peer sent endpoints where a sync was expected", ErrMalformed)
	}
	return body, nil
}

// swap writes msg and reads one message concurrently.
func swap(conn net.Conn, msg []byte) (vers, typ byte, body []byte, err error) {
	werr := make(chan error, 1)
	go func() {
		_, err := conn.Write(msg)
		werr <- err
	}()
	vers, typ, body, rerr := readMessage(conn)
	if rerr != nil {
		// A synchronous conn's Write blocks until the peer reads, which a
		// failed peer never does: unblock it rather than leak it.
		_ = conn.SetWriteDeadline(time.Unix(1, 0))
		<-werr
		return 0, 0, nil, rerr
	}
	if err := <-werr; err != nil {
		return 0, 0, nil, err
	}
	return vers, typ, body, nil
}

// Server listens on addr (":18515" for every address), accepts one
// connection and stops listening, as a perftest server does.
func Server(ctx context.Context, addr string) (net.Conn, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cm: %w", err)
	}
	defer ln.Close()
	return Accept(ctx, ln)
}

// Accept waits on ln for one connection or for ctx to end.
func Accept(ctx context.Context, ln net.Listener) (net.Conn, error) {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	c, err := ln.Accept()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("cm: waiting for a client: %w", ctx.Err())
		}
		return nil, fmt.Errorf("cm: %w", err)
	}
	return c, nil
}

// Client connects to addr, retrying for up to retryFor while the server
// is not listening yet (both sides of a benchmark are often started at
// the same moment).
func Client(ctx context.Context, addr string, retryFor time.Duration) (net.Conn, error) {
	const retryEvery = 100 * time.Millisecond
	deadline := time.Now().Add(retryFor)
	// A per-attempt timeout: a SYN to a host that drops it would
	// otherwise wait for the kernel's minutes-long connect timeout.
	d := net.Dialer{Timeout: 5 * time.Second}
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("cm: connect to %s: %w", addr, ctx.Err())
		}
		if !time.Now().Add(retryEvery).Before(deadline) {
			return nil, fmt.Errorf("cm: connect to %s (retried for %v): %w", addr, retryFor, err)
		}
		t := time.NewTimer(retryEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("cm: connect to %s: %w", addr, ctx.Err())
		case <-t.C:
		}
	}
}

// AgreeScheme picks the recovery scheme two sides use from their
// preference lists: the common scheme with the smallest sum of its
// positions in the two lists, ties broken by name. The rule is symmetric,
// so both sides reach the same answer without another round trip; when
// the lists agree on their first choice, that is it. Without a common
// scheme it is FallbackScheme.
func AgreeScheme(local, remote []string) string {
	best, bestRank := "", -1
	for i, s := range local {
		for j, r := range remote {
			if s != r {
				continue
			}
			if rank := i + j; bestRank < 0 || rank < bestRank || rank == bestRank && s < best {
				best, bestRank = s, rank
			}
			break
		}
	}
	if bestRank < 0 {
		return FallbackScheme
	}
	return best
}

// ConnectQP moves q, which local describes, from RESET to RTS towards the
// peer's QP remote, sending to remote.GID with remote.MAC as the
// destination MAC: on a routed path, replace it with the next hop's
// (NextHopMAC) first. Zero fields of p take perftest's defaults, the same
// as the embedded Connect's (ConnParam.WithDefaults): local ACK timeout 14
// (4.096 µs * 2^14 = 67 ms), retry count 7, RNR retry 7 (infinite),
// minimum RNR NAK timer 12 (0.64 ms), 16 outstanding RDMA READs and
// atomics each way (capped to what the NIC supports), path MTU 1024, and
// every access right. p.PSNA and p.PSNB are ignored: the PSNs come from
// the endpoints.
func ConnectQP(q *verbs.QP, local, remote Endpoint, p verbs.ConnParam) error {
	if q == nil {
		return errors.New("cm: connect: nil QP")
	}
	if local.QPN != q.QPN() {
		return fmt.Errorf("cm: connect: local endpoint names QP %#x, the QP is %#x", local.QPN, q.QPN())
	}
	if err := local.Validate(); err != nil {
		return fmt.Errorf("cm: connect: local endpoint: %w", err)
	}
	if err := remote.Validate(); err != nil {
		return fmt.Errorf("cm: connect: remote endpoint: %w", err)
	}
	if q.Star() != local.Star {
		return fmt.Errorf("cm: connect: local endpoint says StaR %v, QP %#x is StaR %v", local.Star, q.QPN(), q.Star())
	}
	if err := AgreeStar(local.Star, remote.Star); err != nil {
		return err
	}
	if local.GID.Is4() != remote.GID.Is4() {
		// RoCEv2 carries both GIDs in one IP header (Annex A17).
		return fmt.Errorf("cm: connect: local GID %v and remote GID %v are of different IP versions", local.GID, remote.GID)
	}
	p = p.WithDefaults()
	steps := []struct {
		name string
		attr verbs.QPAttr
		mask verbs.AttrMask
	}{
		{"INIT", verbs.QPAttr{State: verbs.QPSInit, AccessFlags: p.Access, Port: 1},
			qp.AttrState | qp.AttrPKeyIndex | qp.AttrPort | qp.AttrAccessFlags},
		{"RTR", verbs.QPAttr{State: verbs.QPSRTR,
			AV:      verbs.AHAttr{DGID: remote.GID, DMAC: remote.MAC, HopLimit: 64},
			PathMTU: p.MTU, DestQPN: remote.QPN, RQPSN: remote.PSN,
			MaxDestRdAtomic: p.MaxRdAtomic, MinRNRTimer: p.MinRNRTimer},
			qp.AttrState | qp.AttrAV | qp.AttrPathMTU | qp.AttrDestQPN | qp.AttrRQPSN | qp.AttrMaxDestRdAtomic | qp.AttrMinRNRTimer},
		{"RTS", verbs.QPAttr{State: verbs.QPSRTS, SQPSN: local.PSN, Timeout: p.Timeout,
			RetryCnt: p.RetryCnt, RNRRetry: p.RNRRetry, MaxRdAtomic: p.MaxRdAtomic},
			qp.AttrState | qp.AttrSQPSN | qp.AttrTimeout | qp.AttrRetryCnt | qp.AttrRNRRetry | qp.AttrMaxQPRdAtomic},
	}
	for _, st := range steps {
		if err := q.Modify(&st.attr, st.mask); err != nil {
			return fmt.Errorf("cm: connect QP %#x to %#x: modify to %s: %w", local.QPN, remote.QPN, st.name, err)
		}
	}
	return nil
}
