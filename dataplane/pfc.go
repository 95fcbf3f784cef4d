package dataplane

import (
	"time"

	"github.com/softnic/softnic/dataplane/netsw"
)

// Honouring priority flow control (IEEE 802.1Qbb, Config.PFC): the port
// at the other end of the wire (a switch whose ingress queue for this
// NIC's traffic passed XOFF) sends a PFC frame, an 802.3 MAC Control
// frame (EtherType 0x8808, opcode 0x0101) that carries a pause time per
// priority in quanta of 512 bit times at the receiving port's speed. For
// the priority the NIC's traffic travels in (Config.PFCPriority) the NIC
// then starts no new frame until the time has passed (802.1Q-2011 36.1.3:
// a frame already on the wire is finished; a software NIC's frames are on
// the wire, or in the port's ring, as soon as they are handed to it).
// A time of 0 resumes at once (XON), and every frame replaces the pause
// in force, as 802.3 Annex 31B's pause timer is reloaded.
//
// A paused port holds its frames, never drops them: the transmit path
// reports a full transmit (beginTx fails, as when the port's ring is
// full), so each QP keeps its packets pending and its place in the ready
// list, and a stateless server's answers wait in the egress queue. The
// pause's end is one of the engine's deadlines (pacedUntil), so a poll
// loop or the Sim comes back exactly then.
//
// softnic's frames are untagged (no 802.1Q tag, so no PCP): which
// priority they travel in is the switch's business (on a RoCE fabric, a
// DSCP-to-priority map, RoCE traffic usually in priority 3). The NIC
// honours the pause for the one priority it is told, that is a PFC frame
// whose priority-enable vector has that priority's bit, for that
// priority's time; a PFC frame without that bit, an 802.3x PAUSE (opcode
// 0x0001, which pauses every priority: PFC and PAUSE are not used on one
// link) and any other or truncated MAC Control frame are counted in
// rx_pause_ignored and change nothing.

// DefaultPFCRate is the port speed pause quanta count at when the engine
// has neither an emulated link rate (Config.LinkRate) nor Config.PFCRate:
// 10 Gb/s, the slowest port RoCE is usually deployed on.
const DefaultPFCRate = 10e9

// pfcPause is the transmit path's pause timer.
type pfcPause struct {
	on       bool   // Config.PFC: honour pauses at all
	priority uint8  // Config.PFCPriority
	rate     uint64 // bits/s the quanta are counted at
	// The pause in force holds the port over [from, until); until <= now
	// when none does. heldNs is the time of the pauses before it.
	from, until time.Duration
	heldNs      uint64
}

func newPFCPause(cfg *Config) pfcPause {
	rate := cfg.LinkRate
	if rate == 0 {
		rate = cfg.PFCRate
	}
	if rate == 0 {
		rate = DefaultPFCRate
	}
	return pfcPause{on: cfg.PFC, priority: uint8(cfg.PFCPriority), rate: rate}
}

// holds reports whether a pause keeps any frame from starting at now.
func (p *pfcPause) holds(now time.Duration) bool { return now < p.until }

// set replaces the pause in force, at now, by one of d (0: none).
func (p *pfcPause) set(now, d time.Duration) {
	p.heldNs = p.held(now)
	p.from, p.until = now, now+d
}

// held is how long pauses have held the port up to now: the time of
// every pause, ended early by the one that replaced it, the one in force
// up to now.
func (p *pfcPause) held(now time.Duration) uint64 {
	return p.heldNs + uint64(min(now, p.until)-p.from)
}

// isMACControl reports whether frame is an 802.3 MAC Control frame
// (PAUSE, PFC): they never carry RoCE, so receive hands them here before
// it parses anything.
func isMACControl(frame []byte) bool {
	return len(frame) >= 14 && frame[12] == netsw.EtherTypeMACControl>>8 && frame[13] == netsw.EtherTypeMACControl&0xff
}

// macControl takes a received MAC Control frame: a PFC frame for the
// honoured priority starts, replaces or ends the pause, anything else is
// counted and ignored. No input can fail it: ParsePFC checks the length.
func (p *txPath) macControl(frame []byte) {
	f, err := netsw.ParsePFC(frame)
	if err != nil || !p.pause.on || f.Enable&(1<<p.pause.priority) == 0 {
		p.counters.RxPauseIgnored++
		return
	}
	now := *p.clock
	q := f.Quanta[p.pause.priority]
	if q == 0 {
		p.counters.RxPrioPauseResume++
		p.pause.set(now, 0)
		return
	}
	p.counters.RxPrioPause++
	p.pause.set(now, netsw.QuantaTime(q, p.pause.rate))
}

// wireOpen reports whether a frame may start at now: the emulated link's
// bucket has tokens and no pause holds the port.
func (p *txPath) wireOpen(now time.Duration) bool {
	return p.link.open(now) && p.txPipe.open(now) && !p.pause.holds(now)
}

// wireOpenAt is when a frame may start again, when wireOpen is false.
func (p *txPath) wireOpenAt() time.Duration {
	return max(p.link.openAt(), p.txPipe.openAt(), p.pause.until)
}
