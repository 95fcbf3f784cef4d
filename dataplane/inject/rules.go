package inject

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/softnic/softnic/bth"
)

// psnMod is the PSN space (IBA 9.7.1: 24 bits).
const psnMod = 1 << 24

// Rule names one packet (or Count consecutive ones) and what to do to it.
type Rule struct {
	Name   string
	Match  Match
	Packet Position
	Action Action
	Delay  time.Duration // ActDelay only, > 0
	Count  int           // consecutive hits the action applies to, >= 1
}

// Match selects packets; a zero field matches anything.
type Match struct {
	Src, Dst  netip.Addr // IP source and destination (invalid: any)
	DstQPN    uint32     // the BTH's destination QP, if HasDstQPN
	HasDstQPN bool
	Kind      Kind // KindAny (or 0, the same in a Match) for every RoCEv2 kind
	Opcode    uint8
	HasOpcode bool
}

// Position is which of the matching packets the rule names: the Nth (from
// 1, arrival order, retransmissions included) if Nth > 0, or else the
// Iteration-th arrival (from 1: the original) of the PSN ISN+PSNOffset
// (mod 2^24), ISN being the PSN of the first packet that matched.
type Position struct {
	Nth       int
	PSNOffset uint32
	Iteration int
}

// matches reports whether s, a RoCEv2 packet, is one m selects.
func (m *Match) matches(s *Summary) bool {
	return (m.Kind == KindAny || m.Kind == KindOther || m.Kind == s.Kind) &&
		(!m.HasOpcode || m.Opcode == s.Opcode) &&
		(!m.HasDstQPN || m.DstQPN == s.DstQPN) &&
		(!m.Src.IsValid() || m.Src == s.Src) &&
		(!m.Dst.IsValid() || m.Dst == s.Dst)
}

// The rule file as JSON: pointers tell an absent field from a zero one.
type (
	fileJSON struct {
		Rules []json.RawMessage `json:"rules"`
	}
	ruleJSON struct {
		Name   string          `json:"name,omitempty"`
		Match  json.RawMessage `json:"match,omitempty"`
		Packet json.RawMessage `json:"packet"`
		Action string          `json:"action"`
		Delay  *string         `json:"delay,omitempty"`
		Count  *int            `json:"count,omitempty"`
	}
	matchJSON struct {
		Src    *string         `json:"src,omitempty"`
		Dst    *string         `json:"dst,omitempty"`
		DstQPN *uint32         `json:"dst_qpn,omitempty"`
		Kind   *string         `json:"kind,omitempty"`
		Opcode json.RawMessage `json:"opcode,omitempty"`
	}
	packetJSON struct {
		Nth       *int    `json:"nth,omitempty"`
		PSNOffset *uint32 `json:"psn_offset,omitempty"`
		Iteration *int    `json:"iteration,omitempty"`
	}
)

// Parse reads a rule file (see the package documentation for its format)
// and returns its rules as a Set. An error is one line naming the rule
// (its index from 0, and its name) and the field.
func Parse(data []byte) (*Set, error) {
	var f fileJSON
	if err := strictDecode(data, &f); err != nil {
		return nil, errors.New(jsonError(err))
	}
	if f.Rules == nil {
		return nil, errors.New(`no "rules" list`)
	}
	rules := make([]Rule, 0, len(f.Rules))
	names := map[string]int{}
	for i, raw := range f.Rules {
		r, err := parseRule(raw)
		if err != nil {
			return nil, fmt.Errorf("rule %d%s: %s", i, quoteName(r.Name), err)
		}
		if j, dup := names[r.Name]; dup && r.Name != "" {
			return nil, fmt.Errorf("rule %d%s: name: rule %d has it too", i, quoteName(r.Name), j)
		}
		names[r.Name] = i
		rules = append(rules, r)
	}
	return NewSet(rules)
}

// LoadFile reads and parses the rule file at path; its errors begin with
// the path.
func LoadFile(path string) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // the *PathError names the file
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func quoteName(name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf(" (%q)", name)
}

// strictDecode decodes one JSON value into v, refusing unknown fields and
// anything after the value.
func strictDecode(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("data after the rules")
	}
	return nil
}

// jsonError says what encoding/json found wrong in the words of the rule
// file: the field, and what it wants.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if i := strings.LastIndexByte(field, '.'); i >= 0 {
			field = field[i+1:]
		}
		if field == "" {
			return fmt.Sprintf("want a JSON object, not %s", te.Value)
		}
		return fmt.Sprintf("%s: want %s, not %s", field, jsonKind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return fmt.Sprintf("not JSON at byte %d: %v", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "not JSON: it ends early"
	case errors.Is(err, io.EOF):
		return "empty: want {\"rules\": [...]}"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"):
		return "a whole number"
	case k == "string":
		return "a string"
	case k == "slice":
		return "a list"
	case k == "struct", k == "map":
		return "an object"
	}
	return k
}

// parseRule checks one rule; its error names the field (the rule's name
// is returned as far as it was read).
func parseRule(raw json.RawMessage) (Rule, error) {
	var rj ruleJSON
	if err := strictDecode(raw, &rj); err != nil {
		// Find the name anyway, for the message.
		var named struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(raw, &named)
		return Rule{Name: named.Name}, errors.New(jsonError(err))
	}
	r := Rule{Name: rj.Name, Match: Match{Kind: KindAny}, Count: 1}
	if len(rj.Match) > 0 && string(rj.Match) != "null" {
		var mj matchJSON
		if err := strictDecode(rj.Match, &mj); err != nil {
			return r, fmt.Errorf("match: %s", jsonError(err))
		}
		if err := mj.to(&r.Match); err != nil {
			return r, fmt.Errorf("match: %w", err)
		}
	}
	if len(rj.Packet) == 0 || string(rj.Packet) == "null" {
		return r, errors.New(`packet: missing: want {"nth": N} or {"psn_offset": N}`)
	}
	var pj packetJSON
	if err := strictDecode(rj.Packet, &pj); err != nil {
		return r, fmt.Errorf("packet: %s", jsonError(err))
	}
	if err := pj.to(&r.Packet); err != nil {
		return r, fmt.Errorf("packet: %w", err)
	}
	a, ok := ParseAction(rj.Action)
	if !ok {
		if rj.Action == "" {
			return r, errors.New("action: missing: want drop, ecn, corrupt, delay or duplicate")
		}
		return r, fmt.Errorf("action %q: want drop, ecn, corrupt, delay or duplicate", rj.Action)
	}
	r.Action = a
	switch {
	case rj.Delay != nil && a != ActDelay:
		return r, fmt.Errorf("delay: only for action delay, not %s", a)
	case rj.Delay == nil && a == ActDelay:
		return r, errors.New(`delay: missing: action delay wants one, e.g. "100us"`)
	case rj.Delay != nil:
		d, err := time.ParseDuration(*rj.Delay)
		if err != nil {
			return r, fmt.Errorf("delay %q: want a Go duration, e.g. \"100us\"", *rj.Delay)
		}
		if d <= 0 {
			return r, fmt.Errorf("delay %q: want more than 0", *rj.Delay)
		}
		r.Delay = d
	}
	if rj.Count != nil {
		if *rj.Count < 1 {
			return r, fmt.Errorf("count %d: want 1 or more", *rj.Count)
		}
		r.Count = *rj.Count
	}
	return r, nil
}

func (mj *matchJSON) to(m *Match) error {
	for _, a := range []struct {
		name string
		s    *string
		to   *netip.Addr
	}{{"src", mj.Src, &m.Src}, {"dst", mj.Dst, &m.Dst}} {
		if a.s == nil {
			continue
		}
		addr, err := netip.ParseAddr(*a.s)
		if err != nil || addr.Zone() != "" {
			return fmt.Errorf("%s %q: want an IPv4 or IPv6 address", a.name, *a.s)
		}
		*a.to = addr.Unmap() // IPv4 frames carry 4-byte addresses
	}
	if mj.DstQPN != nil {
		if *mj.DstQPN >= 1<<24 {
			return fmt.Errorf("dst_qpn %d: want a 24-bit QPN", *mj.DstQPN)
		}
		m.DstQPN, m.HasDstQPN = *mj.DstQPN, true
	}
	if mj.Kind != nil {
		k, ok := ParseKind(*mj.Kind)
		if !ok {
			return fmt.Errorf("kind %q: want data, read_resp, atomic_ack, ack, nak, cnp or any", *mj.Kind)
		}
		m.Kind = k
	}
	if len(mj.Opcode) > 0 && string(mj.Opcode) != "null" {
		op, err := parseOpcode(mj.Opcode)
		if err != nil {
			return err
		}
		m.Opcode, m.HasOpcode = uint8(op), true
	}
	return nil
}

// parseOpcode takes an opcode by its bth name ("RC_RDMA_WRITE_MIDDLE") or
// its number (7); either must be one softnic knows.
func parseOpcode(raw json.RawMessage) (bth.Opcode, error) {
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		for op := range 256 {
			if bth.Lookup(bth.Opcode(op)) != nil && bth.Opcode(op).String() == name {
				return bth.Opcode(op), nil
			}
		}
		return 0, fmt.Errorf("opcode %q: not an opcode name softnic knows (e.g. RC_RDMA_WRITE_MIDDLE)", name)
	}
	n, err := strconv.ParseUint(string(raw), 10, 8)
	if err != nil {
		return 0, fmt.Errorf("opcode %s: want an opcode name or a number from 0 to 255", raw)
	}
	if bth.Lookup(bth.Opcode(n)) == nil {
		return 0, fmt.Errorf("opcode %d: not an opcode softnic knows", n)
	}
	return bth.Opcode(n), nil
}

func (pj *packetJSON) to(p *Position) error {
	switch {
	case pj.Nth != nil && pj.PSNOffset != nil:
		return errors.New("both nth and psn_offset: want one")
	case pj.Nth == nil && pj.PSNOffset == nil:
		return errors.New("missing: want nth or psn_offset")
	case pj.Nth != nil:
		if pj.Iteration != nil {
			return errors.New("iteration: only with psn_offset")
		}
		if *pj.Nth < 1 {
			return fmt.Errorf("nth %d: want 1 or more", *pj.Nth)
		}
		p.Nth = *pj.Nth
		return nil
	}
	if *pj.PSNOffset >= psnMod {
		return fmt.Errorf("psn_offset %d: want less than 2^24", *pj.PSNOffset)
	}
	p.PSNOffset, p.Iteration = *pj.PSNOffset, 1
	if pj.Iteration != nil {
		if *pj.Iteration < 1 {
			return fmt.Errorf("iteration %d: want 1 or more", *pj.Iteration)
		}
		p.Iteration = *pj.Iteration
	}
	return nil
}

// validate checks a rule built in code as Parse checks a file's.
func (r *Rule) validate() error {
	p := &r.Packet
	switch {
	case p.Nth < 0:
		return fmt.Errorf("packet: nth %d: want 1 or more", p.Nth)
	case p.Nth == 0 && p.Iteration < 1:
		return fmt.Errorf("packet: iteration %d: want 1 or more (or nth)", p.Iteration)
	case p.Nth > 0 && (p.Iteration != 0 || p.PSNOffset != 0):
		return errors.New("packet: both nth and psn_offset: want one")
	case p.PSNOffset >= psnMod:
		return fmt.Errorf("packet: psn_offset %d: want less than 2^24", p.PSNOffset)
	case r.Action == ActNone || int(r.Action) >= len(actionNames):
		return fmt.Errorf("action %v: want drop, ecn, corrupt, delay or duplicate", r.Action)
	case r.Action == ActDelay && r.Delay <= 0:
		return fmt.Errorf("delay %v: want more than 0", r.Delay)
	case r.Action != ActDelay && r.Delay != 0:
		return fmt.Errorf("delay: only for action delay, not %s", r.Action)
	case r.Count < 1:
		return fmt.Errorf("count %d: want 1 or more", r.Count)
	case r.Match.Kind != KindAny && r.Match.Kind != KindOther && int(r.Match.Kind) >= len(kindNames):
		return fmt.Errorf("match: kind %v: not a kind", r.Match.Kind)
	case r.Match.HasDstQPN && r.Match.DstQPN >= 1<<24:
		return fmt.Errorf("match: dst_qpn %d: want a 24-bit QPN", r.Match.DstQPN)
	}
	return nil
}

// json returns the rule as its canonical rule-file entry: every field it
// has in a fixed order, the defaults spelt out (kind, count, iteration),
// the opcode by name.
func (r *Rule) json() ruleJSON {
	rj := ruleJSON{Name: r.Name, Action: r.Action.String()}
	var mj matchJSON
	if r.Match.Src.IsValid() {
		s := r.Match.Src.String()
		mj.Src = &s
	}
	if r.Match.Dst.IsValid() {
		s := r.Match.Dst.String()
		mj.Dst = &s
	}
	if r.Match.HasDstQPN {
		q := r.Match.DstQPN
		mj.DstQPN = &q
	}
	k := r.Match.Kind
	if k == KindOther {
		k = KindAny
	}
	ks := k.String()
	mj.Kind = &ks
	if r.Match.HasOpcode {
		mj.Opcode, _ = json.Marshal(bth.Opcode(r.Match.Opcode).String())
	}
	rj.Match, _ = json.Marshal(&mj)
	var pj packetJSON
	if r.Packet.Nth > 0 {
		n := r.Packet.Nth
		pj.Nth = &n
	} else {
		off, it := r.Packet.PSNOffset, r.Packet.Iteration
		pj.PSNOffset, pj.Iteration = &off, &it
	}
	rj.Packet, _ = json.Marshal(&pj)
	if r.Action == ActDelay {
		d := r.Delay.String()
		rj.Delay = &d
	}
	c := r.Count
	rj.Count = &c
	return rj
}

// MarshalJSON returns the set's rules as a canonical rule file, which
// Parse reads back to the same rules.
func (s *Set) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"rules":[`)
	for i := range s.rules {
		if i > 0 {
			b.WriteByte(',')
		}
		rj := s.rules[i].json()
		enc, err := json.Marshal(&rj)
		if err != nil {
			return nil, err
		}
		b.Write(enc)
	}
	b.WriteString("]}")
	return b.Bytes(), nil
}

// String returns the canonical rule file, one rule a line.
func (s *Set) String() string {
	var b strings.Builder
	b.WriteString("{\"rules\": [\n")
	for i := range s.rules {
		rj := s.rules[i].json()
		enc, _ := json.Marshal(&rj)
		b.WriteString("  ")
		b.Write(enc)
		if i < len(s.rules)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]}\n")
	return b.String()
}
