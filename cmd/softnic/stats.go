package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// The stats RPC: a client connects to the control socket and writes one
// JSON object per line; the daemon answers each with one line.
//
//	-> {"op":"stats"}
//	<- {"counters":{"sent_pkts":0,...},"order":["sent_pkts",...]}
//
// counters holds every counter by name (the names of /metrics without the
// softnic_ prefix); order lists them in display order: the engine's, in
// rxe hw_counters order, then the port's (port_*), then the XDP program's
// (xdp_*). An unknown op gets {"error":"..."}. This lives apart from the
// daemon so that it can move into the verbs control protocol as one of its
// operations.

// statsRequest is a control request.
type statsRequest struct {
	Op string `json:"op"`
}

// statsResponse is the answer to {"op":"stats"}.
type statsResponse struct {
	Counters map[string]uint64 `json:"counters,omitempty"`
	Order    []string          `json:"order,omitempty"`
	Error    string            `json:"error,omitempty"`
}

// counter is one named value of a snapshot.
type counter struct {
	name  string
	value uint64
}

// statsServer is the control plane of a daemon without the verbs server:
// it answers the stats RPC on the control socket and has nothing to pump.
type statsServer struct {
	ln       *net.UnixListener
	path     string
	snapshot func() []counter
	log      *slog.Logger

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newStatsServer(ln *net.UnixListener, path string, snapshot func() []counter, log *slog.Logger) *statsServer {
	return &statsServer{ln: ln, path: path, snapshot: snapshot, log: log, conns: map[net.Conn]struct{}{}}
}

// Serve accepts clients until Close.
func (s *statsServer) Serve(ctx context.Context) error {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("control socket: %w", err)
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// handle answers one client's requests until it hangs up or idles for a
// minute.
func (s *statsServer) handle(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(io.LimitReader(c, 1<<20))
	enc := json.NewEncoder(c)
	for {
		c.SetDeadline(time.Now().Add(time.Minute))
		line, err := r.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			return
		}
		var req statsRequest
		var resp statsResponse
		switch err := json.Unmarshal(line, &req); {
		case err != nil:
			resp.Error = "bad request: " + err.Error()
		case req.Op == "stats":
			snap := s.snapshot()
			resp.Counters = make(map[string]uint64, len(snap))
			for _, c := range snap {
				resp.Counters[c.name] = c.value
				resp.Order = append(resp.Order, c.name)
			}
		default:
			resp.Error = fmt.Sprintf("unknown op %q", req.Op)
		}
		if err := enc.Encode(&resp); err != nil {
			s.log.Debug("control client went away", "err", err)
			return
		}
	}
}

// Pump has nothing to move: no verbs clients.
func (s *statsServer) Pump() bool { return false }

// BeforeWait has no shared-memory flags to raise.
func (s *statsServer) BeforeWait() {}

// Close stops accepting, ends open connections and removes the socket.
func (s *statsServer) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if rmErr := os.Remove(s.path); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		err = errors.Join(err, rmErr)
	}
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// queryStats asks the daemon on socket for its counters, in display order.
func queryStats(socket string, timeout time.Duration) ([]counter, error) {
	c, err := net.DialTimeout("unix", socket, timeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if err := json.NewEncoder(c).Encode(statsRequest{Op: "stats"}); err != nil {
		return nil, err
	}
	var resp statsResponse
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.Error != "" {
		return nil, errors.New(resp.Error)
	}
	out := make([]counter, 0, len(resp.Order))
	for _, name := range resp.Order {
		out = append(out, counter{name, resp.Counters[name]})
	}
	return out, nil
}

// statsCmd is `softnic stats`: it prints the daemon's counters as
// `name value` lines, in the daemon's display order (like rdma-core's
// `rdma statistic show`, which lists a device's counters in the driver's
// order).
func statsCmd(args []string) error {
	fs := flag.NewFlagSet("stats", flag.ContinueOnError)
	socket := fs.String("socket", defaultSocket, "control socket of the daemon")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	counters, err := queryStats(*socket, 5*time.Second)
	if err != nil {
		return fmt.Errorf("no daemon answers on %s: %w", *socket, err)
	}
	w := bufio.NewWriter(os.Stdout)
	for _, c := range counters {
		fmt.Fprintf(w, "%s %d\n", c.name, c.value)
	}
	return w.Flush()
}
