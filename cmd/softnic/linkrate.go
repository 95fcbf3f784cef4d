package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// linkRate is --link-rate: the emulated link's rate in bits/s
// (dataplane.Config.LinkRate), 0 for unlimited. It takes tc's bit-rate
// units, decimal as in tc: bit, kbit, mbit, gbit, tbit, in any case (5Gbit,
// 100mbit, 2.5GBIT), or a plain number of bits/s.
type linkRate uint64

// maxLinkRateFlag is dataplane's limit, 1 Pbit/s.
const maxLinkRateFlag = 1e15

var linkRateUnits = []struct {
	suffix string
	mult   float64
}{ // longest suffix first: "kbit" before "bit"
	{"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12}, {"bit", 1},
}

func (r *linkRate) Set(s string) error {
	v, err := parseLinkRate(s)
	if err != nil {
		return err
	}
	*r = linkRate(v)
	return nil
}

func (r *linkRate) String() string {
	if r == nil || *r == 0 {
		return "0"
	}
	v := uint64(*r)
	for _, u := range []struct {
		name string
		mult uint64
	}{{"Tbit", 1e12}, {"Gbit", 1e9}, {"Mbit", 1e6}, {"Kbit", 1e3}} {
		if v%u.mult == 0 {
			return strconv.FormatUint(v/u.mult, 10) + u.name
		}
	}
	return strconv.FormatUint(v, 10) + "bit"
}

var errLinkRate = errors.New("want a rate such as 5Gbit, 500mbit or 1e9 (units bit, kbit, mbit, gbit, tbit; 0: unlimited)")

// parseLinkRate reads a tc-style bit rate.
func parseLinkRate(s string) (uint64, error) {
	num, mult := strings.TrimSpace(s), 1.0
	lower := strings.ToLower(num)
	for _, u := range linkRateUnits {
		if strings.HasSuffix(lower, u.suffix) {
			num, mult = num[:len(num)-len(u.suffix)], u.mult
			break
		}
	}
	if strings.HasSuffix(lower, "bps") {
		// tc's bps is bytes per second, a classic trap: refuse it.
		return 0, fmt.Errorf("link rate %q: bps is ambiguous (tc reads bytes/s); %w", s, errLinkRate)
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("link rate %q: %w", s, errLinkRate)
	}
	v := math.Round(f * mult)
	if v > maxLinkRateFlag || f > 0 && v < 1 {
		return 0, fmt.Errorf("link rate %q: %g bit/s is outside 1 bit/s to 1 Pbit/s (0: unlimited)", s, v)
	}
	return uint64(v), nil
}

// byteCount is a non-negative number of bytes (--link-burst).
type byteCount int

func (b *byteCount) Set(s string) error {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 0 {
		return fmt.Errorf("%q: want a number of bytes, 0 or more", s)
	}
	*b = byteCount(v)
	return nil
}

func (b *byteCount) String() string {
	if b == nil {
		return "0"
	}
	return strconv.Itoa(int(*b))
}
