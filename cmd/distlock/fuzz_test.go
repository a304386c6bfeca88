//go:build unix

package main

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// FuzzArgs runs distlock with arbitrary arguments (NUL separates them in
// the fuzzed string): it never panics, and ends with a documented status:
// 0 (help, version), a usage error (64), an invalid name (65), a command
// that cannot run (126, 127: checked before Redis is contacted), or Redis
// unavailable (69: $REDIS_URL points at a closed port, so nothing is ever
// acquired and no command is ever run). Arguments that name another Redis
// server, and the demo (it starts its own), are left out.
//
//	go test -run '^$' -fuzz '^FuzzArgs$' -fuzztime 1m ./cmd/distlock
func FuzzArgs(f *testing.F) {
	for _, args := range [][]string{
		{"run", "--wait", "0", "job", "--", "true"},
		{"run", "job", "true"},
		{"run", "--ttl", "1ms", "job", "--", "true"},
		{"run", "--kill-grace", "-1s", "job", "--", "true"},
		{"run", "--wait", "soon", "a{b}", "--", "true"},
		{"run", "", "--", "true"},
		{"run", "--", "--", "--"},
		{"run", "--fair", "--wait", "0", "job", "--", "true"},
		{"run", "--fair", "--queue-timeout", "1ms", "job", "--", "true"},
		{"run", "--queue-timeout", "1s", "job", "--", "true"},
		{"run", "--semaphore", "2", "--permits", "3", "job", "--", "true"},
		{"run", "--semaphore", "0", "--fair", "job", "--", "true"},
		{"run", "--semaphore", "4", "--wait", "0", "job", "--", "true"},
		{"status", "--json", "job"},
		{"status", "a\nb"},
		{"list", "*"},
		{"list", "--prefix", "a{", "x"},
		{"unlock", "job"},
		{"unlock", "--force", "job"},
		{"permits", "job", "3"},
		{"permits", "job", "-1"},
		{"help", "run"},
		{"help", "nope"},
		{"--version"},
		{"-x"},
		{},
	} {
		f.Add(strings.Join(args, "\x00"))
	}
	closed := "redis://" + closedAddr(f) + "/0?max_retries=-1"
	f.Fuzz(func(t *testing.T, joined string) {
		var args []string
		if joined != "" {
			args = strings.Split(joined, "\x00")
		}
		if slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "redis") }) ||
			len(args) > 0 && strings.HasPrefix(args[0], "demo") {
			t.Skip("names a Redis server or starts one")
		}
		t.Setenv("REDIS_URL", closed)
		defer silence(t)()
		switch status := runMain(args); status {
		case exitOK, exitUsage, exitBadName, exitUnavailable, exitCannotExec, exitNotFound:
		default:
			t.Errorf("distlock %q: exit status %d", args, status)
		}
	})
}

// silence sends os.Stdout and os.Stderr to /dev/null until the returned
// function is called.
func silence(t *testing.T) func() {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = null, null
	return func() {
		os.Stdout, os.Stderr = stdout, stderr
		null.Close()
	}
}
