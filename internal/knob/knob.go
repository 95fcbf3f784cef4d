// Package knob is the parameters a pluggable part of softnic declares for
// itself and users set by name as owner.knob=value: a loss-recovery
// scheme's (package recovery: melo.pool_bits=2048) and a congestion
// control's (package cc: dcqcn.rai=40Mbit). Each of those packages keeps
// one Registry; a part declares its knobs in its own file, and the
// package checks every setting before anything runs.
package knob

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Knob is one declared parameter.
type Knob struct {
	// Owner is what owns the knob (a scheme, an algorithm), Name the
	// knob's own name (lower case, words joined by '_').
	Owner, Name string
	// Help says what the knob sets, in a few words.
	Help string
	// Default is the value when the knob is not set, as users write it.
	Default string

	parse func(string) (any, error)
}

// Key is the knob's name as users write it: owner.name.
func (k Knob) Key() string { return k.Owner + "." + k.Name }

// Check says why value is not one the knob takes, in a few words; nil
// when it is.
func (k Knob) Check(value string) error {
	_, err := k.parse(value)
	return err
}

// Registry is one package's knobs.
type Registry struct {
	pkg     string          // the package, for panics: "recovery"
	kind    string          // what owns a knob: "scheme"
	example string          // a setting, for errors: "melo.pool_bits=2048"
	owners  func() []string // the owners there are, sorted
	knobs   map[string]*Knob
}

// NewRegistry is package pkg's registry of knobs owned by a kind of part
// (a "scheme", an "algorithm"), whose names owners lists; example is a
// setting as users write it, for the errors.
func NewRegistry(pkg, kind, example string, owners func() []string) *Registry {
	return &Registry{pkg: pkg, kind: kind, example: example, owners: owners, knobs: map[string]*Knob{}}
}

// Declare adds owner's knob name, def when not set, whose values parse
// reads; it panics on a bad name, a duplicate or a default parse does not
// take (programming errors at init time).
func (r *Registry) Declare(owner, name, def, help string, parse func(string) (any, error)) *Knob {
	k := Knob{Owner: owner, Name: name, Help: help, Default: def, parse: parse}
	if strings.ContainsAny(owner, ".=") || strings.ContainsAny(name, ".=") || owner == "" || name == "" {
		panic(r.pkg + ": bad knob name " + k.Key())
	}
	if _, dup := r.knobs[k.Key()]; dup {
		panic(r.pkg + ": knob declared twice: " + k.Key())
	}
	if err := k.Check(def); err != nil {
		panic(fmt.Sprintf("%s: knob %s: default %s: %v", r.pkg, k.Key(), def, err))
	}
	r.knobs[k.Key()] = &k
	return &k
}

// Value is k's value in the settings set: the one set, else the default.
func (r *Registry) Value(k *Knob, set map[string]string) any {
	s, ok := set[k.Key()]
	if !ok {
		s = k.Default
	}
	v, err := k.parse(s)
	if err != nil { // the package checked the settings first
		panic(fmt.Sprintf("%s: %s=%s: %v", r.pkg, k.Key(), s, err))
	}
	return v
}

// Knobs are every declared knob, sorted by Key.
func (r *Registry) Knobs() []Knob {
	out := make([]Knob, 0, len(r.knobs))
	for _, k := range r.knobs {
		out = append(out, *k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// Set sets one knob in *set from "owner.knob=value" once it has checked
// it; the error is one line that says what is wrong.
func (r *Registry) Set(set *map[string]string, arg string) error {
	key, value, err := r.split(arg)
	if err != nil {
		return err
	}
	if *set == nil {
		*set = map[string]string{}
	}
	(*set)[key] = value
	return nil
}

// SetDefault is Set for a knob not set yet; one set already keeps its
// value (a config file under the command line).
func (r *Registry) SetDefault(set *map[string]string, arg string) error {
	key, _, err := r.split(arg)
	if err != nil {
		return err
	}
	if _, ok := (*set)[key]; ok {
		return nil
	}
	return r.Set(set, arg)
}

// String is the settings, owner.knob=value, sorted and comma-separated.
func String(set map[string]string) string {
	keys := sortedKeys(set)
	for i, k := range keys {
		keys[i] = k + "=" + set[k]
	}
	return strings.Join(keys, ",")
}

// Check says what is wrong with the first wrong setting, in knob order:
// a knob no owner declared or a value its knob does not take.
func (r *Registry) Check(set map[string]string) error {
	for _, k := range sortedKeys(set) {
		if _, _, err := r.split(k + "=" + set[k]); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(set map[string]string) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// split parses and checks "owner.knob=value".
func (r *Registry) split(arg string) (key, value string, err error) {
	key, value, ok := strings.Cut(arg, "=")
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	owner, name, dotted := strings.Cut(key, ".")
	if !ok || !dotted || owner == "" || name == "" {
		return "", "", fmt.Errorf("%q: want %s.knob=value, e.g. %s", arg, r.kind, r.example)
	}
	k := r.knobs[key]
	if k == nil {
		owners := r.owners()
		if !slices.Contains(owners, owner) {
			return "", "", fmt.Errorf("%s: no %s %q (have %s)", key, r.kind, owner, strings.Join(owners, ", "))
		}
		var have []string
		for _, k := range r.Knobs() {
			if k.Owner == owner {
				have = append(have, k.Name)
			}
		}
		if len(have) == 0 {
			return "", "", fmt.Errorf("%s: %s %s has no knobs", key, r.kind, owner)
		}
		return "", "", fmt.Errorf("%s: %s %s has no knob %q (its knobs: %s)", key, r.kind, owner, name, strings.Join(have, ", "))
	}
	if err := k.Check(value); err != nil {
		return "", "", fmt.Errorf("%s=%s: %v", key, value, err)
	}
	return key, value, nil
}

// Int reads an integer from lo to hi.
func Int(lo, hi int) func(string) (any, error) {
	return func(s string) (any, error) {
		v, err := strconv.Atoi(s)
		if err != nil {
			return nil, errors.New("not an integer")
		}
		if v < lo || v > hi {
			return nil, fmt.Errorf("out of range %d to %d", lo, hi)
		}
		return v, nil
	}
}

// Duration reads a duration from lo to hi in Go's notation (1.2us,
// 500µs, 2ms).
func Duration(lo, hi time.Duration) func(string) (any, error) {
	return func(s string) (any, error) {
		v, err := time.ParseDuration(s)
		if err != nil {
			return nil, errors.New("not a duration (e.g. 1.2us, 2ms)")
		}
		if v < lo || v > hi {
			return nil, fmt.Errorf("out of range %v to %v", lo, hi)
		}
		return v, nil
	}
}
