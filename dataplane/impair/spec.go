package impair

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Spec is an impairment in netem's words (tc-netem(8)), as Parse reads it
// and String prints it. Percentages are kept as written (1 means 1%), so
// that String gives back what Parse read, digit for digit. The zero Spec
// impairs nothing.
type Spec struct {
	// limit N: at most N frames held at once (0: the stage's capacity).
	Limit int
	// delay TIME [JITTER [CORR%]]: each frame waits a uniform time in
	// [Delay-Jitter, Delay+Jitter), as netem without a distribution table,
	// never less than 0. DelayCorr correlates successive jitter draws.
	Delay, Jitter time.Duration
	DelayCorr     float64
	// loss [random] P% [CORR%].
	LossPct, LossCorr float64
	// loss gemodel P [R [1-H [1-K]]]: Gilbert-Elliott bursts (GE set).
	// GEP is the chance per frame of going from the good state to the bad
	// one, GER from bad to good, GE1H the loss in the bad state and GE1K
	// in the good one; netem's defaults are R = 100-P, 1-H = 100, 1-K = 0.
	GE                   bool
	GEP, GER, GE1H, GE1K float64
	// reorder P% [CORR%] [gap N]: with a delay, P% of frames (every
	// ReorderGap-th at most) are sent at once, without the delay, so they
	// overtake the frames before them.
	ReorderPct, ReorderCorr float64
	ReorderGap              int
	// duplicate P% [CORR%]: a copy is delivered too, with its own jitter.
	DupPct, DupCorr float64
	// corrupt P% [CORR%]: one random bit of the frame is flipped.
	CorruptPct, CorruptCorr float64
	// hold P% TIME (softnic's extension): P% of frames are held back an
	// extra TIME, the in-memory fabric's Reorder and ReorderDelay.
	HoldPct  float64
	HoldTime time.Duration
	// seed N: the random streams' seed (HasSeed); without it the user of
	// the Spec picks one.
	Seed    uint64
	HasSeed bool
}

// Limits of what Parse accepts.
const (
	MaxDelay = time.Second // delay, jitter and hold times
	MaxLimit = 1 << 20     // frames held
	MaxGap   = 1 << 20
)

// Active reports whether s does anything to frames (limit and seed alone
// do not).
func (s Spec) Active() bool {
	return s.Delay > 0 || s.Jitter > 0 || s.LossPct > 0 || s.GE || s.ReorderPct > 0 ||
		s.DupPct > 0 || s.CorruptPct > 0 || s.HoldPct > 0
}

// Parse reads a netem specification: the words after `tc qdisc add ... netem`
// that softnic implements (see the package documentation). Percentages may
// be written with or without %, as tc accepts both; times take tc's units
// (ns, us, usec, ms, msec, s, sec; a bare number is microseconds). The
// empty string is the zero Spec. Errors are one line naming the bad word.
func Parse(text string) (Spec, error) {
	var s Spec
	w := strings.Fields(text)
	seen := map[string]bool{}
	for i := 0; i < len(w); {
		word := w[i]
		i++
		key := word
		switch word { // tc's aliases
		case "latency":
			key = "delay"
		case "drop":
			key = "loss"
		}
		if seen[key] {
			return Spec{}, fmt.Errorf("netem: %q given twice", key)
		}
		seen[key] = true
		// arg takes the next word, which must exist.
		arg := func(what string) (string, error) {
			if i >= len(w) {
				return "", fmt.Errorf("netem: %s needs %s", word, what)
			}
			i++
			return w[i-1], nil
		}
		// optional reports whether the next word is a number (netem's
		// NEXT_IS_NUMBER), i.e. an optional argument of this word.
		optional := func() bool {
			return i < len(w) && len(w[i]) > 0 && (w[i][0] >= '0' && w[i][0] <= '9' || w[i][0] == '.')
		}
		var err error
		switch word {
		case "limit":
			var a string
			if a, err = arg("a frame count"); err == nil {
				var n uint64
				n, err = strconv.ParseUint(a, 10, 64)
				if err != nil || n < 1 || n > MaxLimit {
					err = fmt.Errorf("netem: limit %q: want a frame count in [1, %d]", a, MaxLimit)
				}
				s.Limit = int(n)
			}
		case "delay", "latency":
			var a string
			if a, err = arg("a time"); err == nil {
				s.Delay, err = parseTime(word, a)
			}
			if err == nil && optional() {
				s.Jitter, err = parseTime("jitter", w[i])
				i++
				if err == nil && optional() {
					s.DelayCorr, err = parsePct("delay correlation", w[i])
					i++
				}
			}
		case "loss", "drop":
			if i < len(w) && w[i] == "random" {
				i++
			}
			if i < len(w) && (w[i] == "state" || w[i] == "ecn") {
				return Spec{}, fmt.Errorf("netem: loss %q is not supported (use loss gemodel for bursts)", w[i])
			}
			if i < len(w) && w[i] == "gemodel" {
				i++
				err = s.parseGE(w, &i)
				break
			}
			var a string
			if a, err = arg("a percentage"); err == nil {
				s.LossPct, err = parsePct("loss", a)
			}
			if err == nil && optional() {
				s.LossCorr, err = parsePct("loss correlation", w[i])
				i++
			}
		case "reorder":
			var a string
			if a, err = arg("a percentage"); err == nil {
				s.ReorderPct, err = parsePct("reorder", a)
			}
			if err == nil && optional() {
				s.ReorderCorr, err = parsePct("reorder correlation", w[i])
				i++
			}
		case "gap":
			var a string
			if a, err = arg("a frame count"); err == nil {
				var n uint64
				n, err = strconv.ParseUint(a, 10, 64)
				if err != nil || n < 1 || n > MaxGap {
					err = fmt.Errorf("netem: gap %q: want a frame count in [1, %d]", a, MaxGap)
				}
				s.ReorderGap = int(n)
			}
		case "duplicate":
			var a string
			if a, err = arg("a percentage"); err == nil {
				s.DupPct, err = parsePct("duplicate", a)
			}
			if err == nil && optional() {
				s.DupCorr, err = parsePct("duplicate correlation", w[i])
				i++
			}
		case "corrupt":
			var a string
			if a, err = arg("a percentage"); err == nil {
				s.CorruptPct, err = parsePct("corrupt", a)
			}
			if err == nil && optional() {
				s.CorruptCorr, err = parsePct("corrupt correlation", w[i])
				i++
			}
		case "hold":
			var a string
			if a, err = arg("a percentage and a time"); err == nil {
				s.HoldPct, err = parsePct("hold", a)
			}
			if err == nil {
				if a, err = arg("a time after its percentage"); err == nil {
					s.HoldTime, err = parseTime("hold", a)
				}
			}
		case "seed":
			var a string
			if a, err = arg("a number"); err == nil {
				s.Seed, err = strconv.ParseUint(a, 10, 64)
				if err != nil {
					err = fmt.Errorf("netem: seed %q: want an unsigned 64-bit number", a)
				}
				s.HasSeed = true
			}
		case "rate":
			err = errors.New(`netem: "rate" is not supported (softnic run --link-rate paces what the daemon transmits)`)
		case "distribution", "slot", "ecn", "jitter":
			err = fmt.Errorf("netem: %q is not supported (jitter is uniform; see docs/impair.md)", word)
		default:
			err = fmt.Errorf("netem: unknown word %q", word)
		}
		if err != nil {
			return Spec{}, err
		}
	}
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// parseGE reads gemodel's P [R [1-H [1-K]]] from w[*i:], with netem's
// defaults (iproute2 q_netem.c).
func (s *Spec) parseGE(w []string, i *int) error {
	names := []string{"gemodel p", "gemodel r", "gemodel 1-h", "gemodel 1-k"}
	if *i >= len(w) {
		return errors.New("netem: loss gemodel needs a percentage")
	}
	s.GE = true
	vals := []*float64{&s.GEP, &s.GER, &s.GE1H, &s.GE1K}
	n := 0
	for ; n < 4 && *i < len(w); n++ {
		if n > 0 && !(len(w[*i]) > 0 && (w[*i][0] >= '0' && w[*i][0] <= '9' || w[*i][0] == '.')) {
			break
		}
		v, err := parsePct(names[n], w[*i])
		if err != nil {
			return err
		}
		*vals[n] = v
		*i++
	}
	if n < 2 {
		s.GER = 100 - s.GEP
	}
	if n < 3 {
		s.GE1H = 100
	}
	return nil
}

// Validate checks the ranges Parse checks, for a Spec built in code.
func (s *Spec) Validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{
		{"delay correlation", s.DelayCorr}, {"loss", s.LossPct}, {"loss correlation", s.LossCorr},
		{"gemodel p", s.GEP}, {"gemodel r", s.GER}, {"gemodel 1-h", s.GE1H}, {"gemodel 1-k", s.GE1K},
		{"reorder", s.ReorderPct}, {"reorder correlation", s.ReorderCorr},
		{"duplicate", s.DupPct}, {"duplicate correlation", s.DupCorr},
		{"corrupt", s.CorruptPct}, {"corrupt correlation", s.CorruptCorr}, {"hold", s.HoldPct},
	} {
		if !(p.v >= 0 && p.v <= 100) {
			return fmt.Errorf("netem: %s %v%% is not in [0%%, 100%%]", p.name, p.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"delay", s.Delay}, {"jitter", s.Jitter}, {"hold", s.HoldTime}} {
		if d.v < 0 || d.v > MaxDelay {
			return fmt.Errorf("netem: %s %v is not in [0, %v]", d.name, d.v, MaxDelay)
		}
	}
	switch {
	case s.Limit < 0 || s.Limit > MaxLimit:
		return fmt.Errorf("netem: limit %d is not in [1, %d]", s.Limit, MaxLimit)
	case s.ReorderGap < 0 || s.ReorderGap > MaxGap:
		return fmt.Errorf("netem: gap %d is not in [1, %d]", s.ReorderGap, MaxGap)
	case s.GE && s.LossPct > 0:
		return errors.New("netem: loss given twice (random and gemodel)")
	case s.ReorderPct > 0 && s.Delay == 0:
		// tc: "reordering not possible without specifying some delay".
		return errors.New("netem: reorder needs a delay: it sends frames without the delay the others wait")
	case s.ReorderGap > 0 && s.ReorderPct == 0:
		return errors.New("netem: gap needs reorder")
	case s.HoldPct > 0 && s.HoldTime == 0:
		return errors.New("netem: hold needs a time after its percentage")
	}
	return nil
}

// parsePct reads a percentage: "1%", "0.5%" or, as tc, a bare "1".
func parsePct(what, a string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(a, "%"), 64)
	if err != nil || strings.HasSuffix(strings.TrimSuffix(a, "%"), "%") || !(v >= 0 && v <= 100) {
		return 0, fmt.Errorf("netem: %s %q: want a percentage in [0%%, 100%%] such as 1%% or 0.5%%", what, a)
	}
	return v, nil
}

var timeUnits = []struct {
	suffix string
	unit   time.Duration
}{ // longest first within a family: "usec" before "us", "msec" before "ms" before "s"
	{"nsecs", time.Nanosecond}, {"nsec", time.Nanosecond}, {"ns", time.Nanosecond},
	{"usecs", time.Microsecond}, {"usec", time.Microsecond}, {"us", time.Microsecond},
	{"msecs", time.Millisecond}, {"msec", time.Millisecond}, {"ms", time.Millisecond},
	{"secs", time.Second}, {"sec", time.Second}, {"s", time.Second},
}

// parseTime reads a tc time: a number and a unit, microseconds if bare.
func parseTime(what, a string) (time.Duration, error) {
	num, unit := a, time.Microsecond
	for _, u := range timeUnits {
		if strings.HasSuffix(a, u.suffix) {
			num, unit = a[:len(a)-len(u.suffix)], u.unit
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	d := v * float64(unit)
	if err != nil || !(d >= 0 && d <= float64(MaxDelay)) {
		return 0, fmt.Errorf("netem: %s %q: want a time in [0, %v] such as 100us, 1.5ms or 1s", what, a, MaxDelay)
	}
	return time.Duration(math.Round(d)), nil
}

// String prints s in netem's words, in the order tc shows them; Parse reads
// it back to the same Spec. The zero Spec prints as "".
func (s Spec) String() string {
	var b []string
	add := func(words ...string) { b = append(b, words...) }
	if s.Limit > 0 {
		add("limit", strconv.Itoa(s.Limit))
	}
	if s.Delay > 0 || s.Jitter > 0 || s.DelayCorr > 0 {
		add("delay", formatTime(s.Delay))
		if s.Jitter > 0 || s.DelayCorr > 0 {
			add(formatTime(s.Jitter))
		}
		if s.DelayCorr > 0 {
			add(formatPct(s.DelayCorr))
		}
	}
	if s.GE {
		add("loss", "gemodel", formatPct(s.GEP), formatPct(s.GER), formatPct(s.GE1H), formatPct(s.GE1K))
	} else if s.LossPct > 0 || s.LossCorr > 0 {
		add("loss", formatPct(s.LossPct))
		if s.LossCorr > 0 {
			add(formatPct(s.LossCorr))
		}
	}
	pct := func(word string, p, corr float64) {
		if p > 0 || corr > 0 {
			add(word, formatPct(p))
			if corr > 0 {
				add(formatPct(corr))
			}
		}
	}
	pct("duplicate", s.DupPct, s.DupCorr)
	pct("reorder", s.ReorderPct, s.ReorderCorr)
	if s.ReorderGap > 0 {
		add("gap", strconv.Itoa(s.ReorderGap))
	}
	pct("corrupt", s.CorruptPct, s.CorruptCorr)
	if s.HoldPct > 0 || s.HoldTime > 0 {
		add("hold", formatPct(s.HoldPct), formatTime(s.HoldTime))
	}
	if s.HasSeed {
		add("seed", strconv.FormatUint(s.Seed, 10))
	}
	return strings.Join(b, " ")
}

func formatPct(p float64) string { return strconv.FormatFloat(p, 'g', -1, 64) + "%" }

// formatTime prints d in the largest of s, ms, us, ns that divides it.
func formatTime(d time.Duration) string {
	for _, u := range []struct {
		name string
		unit time.Duration
	}{{"s", time.Second}, {"ms", time.Millisecond}, {"us", time.Microsecond}} {
		if d != 0 && d%u.unit == 0 {
			return strconv.FormatInt(int64(d/u.unit), 10) + u.name
		}
	}
	if d == 0 {
		return "0us"
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}
