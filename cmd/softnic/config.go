package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
)

// applyConfigFile sets the flags of fs from a config file: one `key =
// value` per line, keys named like the flags without dashes, `#` starting
// a comment line, blank lines ignored. A flag given on the command line
// (set in fs already) wins over the file, so a deployment's file holds the
// defaults and an operator can still override one thing by hand; for
// scheme-param, repeated, that is knob by knob. What the
// file says wrongly is a usage error (exit status 2), as on the command
// line; a file that cannot be read is a failure (1).
func applyConfigFile(fs *flag.FlagSet, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		key, value, ok := strings.Cut(text, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !ok || key == "" {
			return usagef("config %s:%d: want `key = value`, got %q", path, line, text)
		}
		if key == "config" || fs.Lookup(key) == nil {
			return usagef("config %s:%d: unknown key %q", path, line, key)
		}
		// A flag of many settings (scheme-param, and the flags of one
		// of them) takes the file's where the command line set none.
		if d, ok := fs.Lookup(key).Value.(defaultSetter); ok {
			if err := d.SetDefault(value); err != nil {
				return usagef("config %s:%d: %s: %w", path, line, key, err)
			}
			continue
		}
		if explicit[key] {
			continue
		}
		if err := fs.Set(key, value); err != nil {
			return usagef("config %s:%d: %s: %w", path, line, key, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// defaultSetter is a flag value of many settings, each of which the
// command line or the file may set: SetDefault sets one unless it is set
// already (recovery.KnobValues: --scheme-param).
type defaultSetter interface{ SetDefault(string) error }
