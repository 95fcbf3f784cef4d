package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/softnic/softnic", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"},
		}}
	clean := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}}
	host := runtime.GOOS + "/" + runtime.GOARCH
	for _, tc := range []struct {
		name   string
		bi     *debug.BuildInfo
		linked linked
		want   string
	}{
		{"stamped, dirty", stamped, linked{}, "(devel) (commit 0123456789abcdef0123456789abcdef01234567, 2026-01-02T03:04:05Z, dirty) go1.26.0 linux/arm64"},
		{"link-time version wins", stamped, linked{version: "v0.4.0-2-g0123456-dirty"}, "v0.4.0-2-g0123456-dirty (commit 0123456789abcdef0123456789abcdef01234567, 2026-01-02T03:04:05Z, dirty) go1.26.0 linux/arm64"},
		{"module version, clean", clean, linked{}, "v1.2.3 (commit abc) go1.26.0 " + host},
		{"no VCS stamp", &debug.BuildInfo{GoVersion: "go1.26.0"}, linked{}, "unknown (commit unknown) go1.26.0 " + host},
		// make install's -X values: the commit and flag from git, in a
		// worktree where the go command stamps nothing.
		{"linked commit, clean", &debug.BuildInfo{GoVersion: "go1.26.0"}, linked{"v0.4.0", "fedcba", "false"}, "v0.4.0 (commit fedcba) go1.26.0 " + host},
		{"linked commit, dirty", &debug.BuildInfo{GoVersion: "go1.26.0"}, linked{"v0.4.0-dirty", "fedcba", "true"}, "v0.4.0-dirty (commit fedcba, dirty) go1.26.0 " + host},
		// The linked commit wins over a stamp; the stamp's time is
		// dropped when it is another commit's.
		{"linked over stamped", stamped, linked{"v1", "fedcba", "false"}, "v1 (commit fedcba) go1.26.0 linux/arm64"},
		{"linked same as stamped", stamped, linked{"v1", "0123456789abcdef0123456789abcdef01234567", "true"}, "v1 (commit 0123456789abcdef0123456789abcdef01234567, 2026-01-02T03:04:05Z, dirty) go1.26.0 linux/arm64"},
		{"no build info", nil, linked{}, "unknown (commit unknown) " + runtime.Version() + " " + host},
	} {
		if got := fromBuildInfo(tc.bi, tc.linked).String(); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
