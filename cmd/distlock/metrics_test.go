//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	distlockprom "github.com/distlock/distlock/prometheus"
	"github.com/distlock/distlock/redistest"
)

// TestRunMetricsEndpoint runs a command with run --metrics-addr on a
// given port: while the command runs, http://ADDR/metrics serves the
// library's metrics (the lock held, its acquisition), the Go runtime's
// and the process's; run prints nothing of its own on stdout (which is
// the command's) nor, without --verbose, on stderr; and the server is
// gone once run has exited.
func TestRunMetricsEndpoint(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	out, goFile := filepath.Join(dir, "out"), filepath.Join(dir, "go")
	addr := freeAddr(t)
	p := start(t, []string{"OUT=" + out, "GO=" + goFile}, "run", "--redis", srv.URL(), "--metrics-addr", addr, "metered", "--",
		"sh", "-c", "echo from-the-command\n"+holdUntilGo)
	awaitFile(t, out)

	body := scrape(t, "http://"+addr+"/metrics")
	for _, want := range []string{
		"\n# TYPE distlock_held_locks gauge\n",
		"\ndistlock_held_locks{kind=\"mutex\",store=\"redis\"} 1\n",
		"\ndistlock_acquire_duration_seconds_count{kind=\"mutex\",outcome=\"ok\",store=\"redis\"} 1\n",
		"\ndistlock_calls_total{kind=\"mutex\",op=\"lock\",outcome=\"ok\",store=\"redis\"} 1\n",
		"\ngo_goroutines ",
		"\nprocess_cpu_seconds_total ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %q:\n%s", strings.TrimSpace(want), body)
		}
	}
	if r, err := http.Get("http://" + addr + "/"); err == nil {
		r.Body.Close()
		if r.StatusCode != http.StatusNotFound {
			t.Errorf("GET / answered %s, want 404: only /metrics is served", r.Status)
		}
	}

	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", code, p.errOut())
	}
	if got := p.out(); got != "from-the-command\n" {
		t.Errorf("stdout %q, want the command's output only", got)
	}
	if got := p.errOut(); got != "" {
		t.Errorf("stderr %q, want nothing without --verbose", got)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after run exited", addr)
	}
}

// TestRunMetricsAddrErrors checks that an address that run
// --metrics-addr cannot listen on (in use, malformed) is a usage error
// (64), reported in one line before the lock is taken or the command
// run, with --once-per too.
func TestRunMetricsAddrErrors(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	for _, tt := range []struct {
		addr, want string
		flags      []string
	}{
		{busy.Addr().String(), "address already in use", nil},
		{busy.Addr().String(), "address already in use", []string{"--once-per", "1h"}},
		{"127.0.0.1:http-alt-nope", "cannot serve metrics on --metrics-addr 127.0.0.1:http-alt-nope", nil},
		{"no-port", "missing port", nil},
	} {
		ran := filepath.Join(t.TempDir(), "ran")
		args := append([]string{"run", "--redis", srv.URL(), "--metrics-addr", tt.addr}, tt.flags...)
		r := run(t, append(args, "unmetered", "--", "touch", ran)...)
		r.wantCode(t, exitUsage)
		wantOneLine(t, r.stderr)
		if !strings.Contains(r.stderr, "cannot serve metrics on --metrics-addr "+tt.addr) || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("--metrics-addr %s %q: stderr %q, want %q", tt.addr, tt.flags, r.stderr, tt.want)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Errorf("--metrics-addr %s %q: the command ran", tt.addr, tt.flags)
		}
	}
	if info := inspect(t, c, "unmetered"); info.LastToken != 0 {
		t.Errorf("the lock was taken (last token %d) although --metrics-addr could not be served", info.LastToken)
	}
}

// TestDashboardCommand checks that distlock dashboard prints the
// dashboard of the prometheus module, byte for byte, as JSON, and takes
// no argument.
func TestDashboardCommand(t *testing.T) {
	t.Parallel()
	r := run(t, "dashboard")
	r.wantCode(t, 0)
	if want := distlockprom.Dashboard(); r.stdout != string(want) {
		t.Errorf("distlock dashboard printed %d bytes, not the %d of prometheus.Dashboard()", len(r.stdout), len(want))
	}
	var d struct {
		Title  string            `json:"title"`
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || len(d.Panels) == 0 {
		t.Errorf("distlock dashboard printed no dashboard with panels (%v):\n%.300s", err, r.stdout)
	}
	if r.stderr != "" {
		t.Errorf("stderr %q", r.stderr)
	}
	r = run(t, "dashboard", "extra")
	r.wantCode(t, exitUsage)
	wantOneLine(t, r.stderr)
}

// freeAddr returns a loopback address, 127.0.0.1:PORT, whose port was
// free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// scrape returns the body of a GET of url, failing the test unless it
// answers 200.
func scrape(t *testing.T, url string) string {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer r.Body.Close()
	var b bytes.Buffer
	if _, err := io.Copy(&b, r.Body); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, r.Status, b.String())
	}
	return b.String()
}
