//go:build unix

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/redistest"
)

// TestRedissPlainPort points rediss:// at a plain-text Redis: run, status
// and list fail within a few seconds, saying it is about TLS.
func TestRedissPlainPort(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	url := "rediss://" + srv.Addr()
	for _, args := range [][]string{
		{"run", "--redis", url, "tls", "--", "true"},
		{"status", "--redis", url, "tls"},
		{"list", "--redis", url},
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			began := time.Now()
			r := run(t, args...)
			r.wantCode(t, exitUnavailable)
			if took := time.Since(began); took > 8*time.Second {
				t.Errorf("took %v, want a few seconds", took)
			}
			wantOneLine(t, r.stderr)
			if !strings.Contains(r.stderr, "TLS") {
				t.Errorf("stderr %q does not name TLS", r.stderr)
			}
		})
	}
}
