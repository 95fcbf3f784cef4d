// Package buildinfo is what `softnic version` and `softnic-bench
// --version` print: the version, the commit it was built from and
// whether the tree had uncommitted changes, and the Go toolchain.
//
// The version is Version when the build set it (make install does:
// -ldflags "-X github.com/softnic/softnic/internal/buildinfo.Version=..."),
// else the module version the go command recorded ("(devel)" for a build
// in the checkout, a tag for `go install ...@vX`). The commit and the
// dirty flag are Commit and Dirty when the build set them (make install
// does, from git), else the VCS stamp the go command adds when it builds
// inside a git checkout (-buildvcs; it finds no checkout in a git
// worktree, whose .git is a file, nor with GOFLAGS=-buildvcs=false).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time (-X); empty, the go command's records are used.
var (
	Version string // "v0.3.0-4-gabcdef1-dirty": git describe
	Commit  string // the full revision: git rev-parse HEAD
	Dirty   string // "true" or "false": the tree had uncommitted changes
)

// Info is a binary's build information.
type Info struct {
	Version  string // "v0.3.0", "v0.3.0-4-gabcdef1-dirty", "(devel)" or "unknown"
	Commit   string // the full revision, "" when the build has no VCS stamp
	Time     string // the commit's time (RFC 3339), "" likewise
	Dirty    bool   // the tree had changes that were not committed
	Go       string // the toolchain: "go1.26.0"
	Platform string // GOOS/GOARCH
}

// Read returns this binary's build information.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, linked{Version, Commit, Dirty})
}

// linked is what the build set with -X.
type linked struct{ version, commit, dirty string }

// fromBuildInfo fills an Info from what the go command recorded (bi may
// be nil: a binary built without module support) and the link-time
// values, which win.
func fromBuildInfo(bi *debug.BuildInfo, l linked) Info {
	info := recorded(bi)
	if l.version != "" {
		info.Version = l.version
	}
	if l.commit != "" {
		if l.commit != info.Commit {
			info.Time = "" // the stamp's time is another commit's
		}
		info.Commit, info.Dirty = l.commit, l.dirty == "true"
	}
	if info.Version == "" {
		info.Version = "unknown"
	}
	return info
}

// recorded is what the go command recorded in the binary.
func recorded(bi *debug.BuildInfo) Info {
	info := Info{Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		return info
	}
	if bi.GoVersion != "" {
		info.Go = bi.GoVersion
	}
	info.Version = bi.Main.Version
	goos, goarch := runtime.GOOS, runtime.GOARCH
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Dirty = s.Value == "true"
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	info.Platform = goos + "/" + goarch
	return info
}

// String is the one line the version commands print, after the program's
// name: "v0.3.0 (commit 0123abc..., 2026-01-02T03:04:05Z, dirty) go1.26.0
// linux/amd64". A build without a VCS stamp says "commit unknown".
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Version)
	b.WriteString(" (commit ")
	if i.Commit == "" {
		b.WriteString("unknown")
	} else {
		b.WriteString(i.Commit)
	}
	if i.Time != "" {
		b.WriteString(", " + i.Time)
	}
	if i.Dirty {
		b.WriteString(", dirty")
	}
	fmt.Fprintf(&b, ") %s %s", i.Go, i.Platform)
	return b.String()
}
