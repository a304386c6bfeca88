package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// What ships stays lean: the distlock binary links neither the testing
// package nor a test helper (the demo's throwaway Redis comes from
// redistest's NewServer, which needs no testing).
func TestBinaryLinksNoTesting(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, p := range []string{"testing", "go.uber.org/goleak"} {
		if slices.Contains(deps, p) {
			t.Errorf("the distlock command links %s", p)
		}
	}
}
