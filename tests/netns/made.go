package netns

import (
	"fmt"
	"os"
	"testing"
)

// RequireMade skips the test (fails it when Strict) unless path exists;
// how names what makes it, e.g. the script step that downloads or builds
// it ("scripts/rxe-vm.sh fetch"): for what no Debian package installs.
func RequireMade(tb testing.TB, path, how string) {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		skip(tb, fmt.Sprintf("%s (made by %s)", path, how), "%v", err)
	}
}
