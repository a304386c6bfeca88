//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/distlock/distlock/redistest"
)

// TestStatusWatchPipe runs status --watch with its output to a file (not
// a terminal): it shows the state of the lock every --interval, one
// state after another, with no terminal control sequences: text states
// each after a blank line, JSON ones as a stream of objects. A state
// shown after the lock is taken differs from the one before; SIGINT ends
// the watch with status 0.
func TestStatusWatchPipe(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	for _, tt := range []struct {
		mode         string
		flags        []string
		free, locked string
		statesOf     func(t *testing.T, out string) []string
	}{
		{"text", nil, "state:      free", "state:      locked", textStates},
		{"json", []string{"--json"}, `"locked": false`, `"locked": true`, jsonStates},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			name := "watched-" + tt.mode
			args := append([]string{"status", "--redis", srv.URL(), "--watch", "--interval", "100ms"}, tt.flags...)
			p := start(t, nil, append(args, name)...)
			eventually(t, "status --watch to show the lock free", func() bool { return strings.Contains(p.out(), tt.free) })
			hold(t, c, name)
			eventually(t, "status --watch to show the lock locked", func() bool { return strings.Contains(p.out(), tt.locked) })
			if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(); code != 0 {
				t.Fatalf("status --watch interrupted by SIGINT: exit status %d, want 0; stderr:\n%s", code, p.errOut())
			}
			out := p.out()
			if strings.Contains(out, "\x1b") {
				t.Errorf("status --watch wrote terminal control sequences to a file:\n%q", out)
			}
			if p.errOut() != "" {
				t.Errorf("status --watch wrote to stderr: %q", p.errOut())
			}
			states := tt.statesOf(t, out)
			if len(states) < 2 {
				t.Fatalf("status --watch showed %d states, want at least 2:\n%s", len(states), out)
			}
			if !strings.Contains(states[0], tt.free) || !strings.Contains(states[len(states)-1], tt.locked) {
				t.Errorf("status --watch: first state\n%s\nlast state\n%s\nwant free, then locked", states[0], states[len(states)-1])
			}
		})
	}
}

// textStates splits the text output of status --watch into its states:
// each starts with its header line, and follows the last after a blank
// line.
func textStates(t *testing.T, out string) []string {
	t.Helper()
	const header = "Every 100ms: distlock status watched-text  "
	if !strings.HasPrefix(out, header) {
		t.Fatalf("status --watch output does not start with %q:\n%s", header, out)
	}
	states := strings.Split(out, "\n\n"+header)
	for i, st := range states {
		if strings.Count(st, header) > 1 || i > 0 && strings.Contains(st, header) {
			t.Fatalf("state %d is not separated from the next by a blank line:\n%s", i, st)
		}
	}
	return states
}

// jsonStates decodes the JSON output of status --watch: a stream of
// objects, one per state.
func jsonStates(t *testing.T, out string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var states []string
	for {
		var st json.RawMessage
		err := dec.Decode(&st)
		if errors.Is(err, io.EOF) {
			return states
		}
		if err != nil {
			t.Fatalf("status --watch --json printed what is not a stream of JSON objects (%v):\n%s", err, out)
		}
		var fields lockState
		if err := json.Unmarshal(st, &fields); err != nil || fields.Name != "watched-json" {
			t.Fatalf("status --watch --json printed %s (%v), want the state of watched-json", st, err)
		}
		states = append(states, string(st))
	}
}

// TestStatusWatchFlags checks the usage errors of --watch and --interval.
func TestStatusWatchFlags(t *testing.T) {
	t.Parallel()
	url := "redis://" + closedAddr(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--interval", "1s", "job"}, "--interval is for --watch"},
		{[]string{"--watch", "--interval", "10ms", "job"}, "invalid value for --interval: 10ms is not between 100ms and 1h0m0s"},
		{[]string{"--watch", "--interval", "2h", "job"}, "is not between"},
		{[]string{"--watch"}, "want one lock NAME"},
	} {
		r := run(t, append([]string{"status", "--redis", url}, tt.args...)...)
		r.wantCode(t, exitUsage)
		wantOneLine(t, r.stderr)
		if !strings.Contains(r.stderr, tt.want) {
			t.Errorf("status %q: stderr %q, want %q", tt.args, r.stderr, tt.want)
		}
	}
	// A store that cannot be reached at the start ends the watch, as it
	// ends status.
	r := run(t, "status", "--redis", url, "--watch", "job")
	r.wantCode(t, exitUnavailable)
	wantOneLine(t, r.stderr)
}
