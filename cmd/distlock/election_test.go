//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
)

// campaign campaigns in the election name with value until the test
// leads, and resigns when the test ends.
func campaign(t *testing.T, c *distlock.Client, name, value string, opts ...distlock.MutexOption) *distlock.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	lease, err := c.Election(name, opts...).Campaign(ctx, value)
	if err != nil {
		t.Fatalf("campaign in %q: %v", name, err)
	}
	t.Cleanup(func() { _ = lease.Unlock(context.Background()) })
	return lease
}

// TestElection checks what status, status --json and list show of an
// election that the test leads; that run refuses its name (78), leaving
// the leader be; and that unlock --force deposes the leader, and says that
// the candidate that waited leads now.
func TestElection(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	lease := campaign(t, c, "scheduler", "10.0.0.7:8080", distlock.WithTTL(time.Second))
	term := itoa(int(lease.Token()))
	host, _ := os.Hostname()
	me := fmt.Sprintf("%s/%d", host, os.Getpid())

	r := run(t, "status", "--redis", srv.URL(), "scheduler")
	r.wantCode(t, 0)
	for _, want := range []string{"state:      locked\n", "kind:       election\n", "leader:     " + me + " (id ",
		"since:      ", "holds:      1\n", "ttl:        ", "token:      " + term + "\n", "value:      \"10.0.0.7:8080\"\n",
		"last token: " + term + "\n", "queued:     0\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status does not contain %q:\n%s", want, r.stdout)
		}
	}
	st := statusJSON(t, srv, "scheduler")
	switch {
	case st.Kind != "election" || !st.Locked || st.Fair || st.Mode != "":
		t.Errorf("status %+v, want an election with a leader", st)
	case st.Holder == nil || st.Holder.PID != os.Getpid() || st.Holder.Host != host || st.Holder.ID == "":
		t.Errorf("holder %+v, want the test (pid %d on %s)", st.Holder, os.Getpid(), host)
	case st.Token != lease.Token() || st.LastToken != lease.Token() || st.Value != "10.0.0.7:8080":
		t.Errorf("status %+v, want token and last token %d, value 10.0.0.7:8080", st, lease.Token())
	case st.Holds != 1 || st.TTLMillis <= 0 || st.TTLMillis > 1000 || st.Queued != 0 || st.Waiters != 0:
		t.Errorf("status %+v, want held once, with a lease of at most 1s, nobody queued", st)
	}
	r = run(t, "list", "--redis", srv.URL())
	r.wantCode(t, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if f := strings.Fields(lines[len(lines)-1]); len(lines) != 2 || len(f) != 8 ||
		f[0] != "scheduler" || f[1] != "election" || f[2] != me || f[6] != term || f[7] != "0" {
		t.Errorf("list printed:\n%s\nwant scheduler, election, %s, since, ttl, term %s, no waiters", r.stdout, me, term)
	}

	ran := filepath.Join(t.TempDir(), "ran")
	for _, flags := range [][]string{nil, {"--wait", "0"}, {"--fair"}} {
		args := append([]string{"run", "--redis", srv.URL()}, flags...)
		r = run(t, append(args, "scheduler", "--", "touch", ran)...)
		r.wantCode(t, exitWrongKind)
		wantOneLine(t, r.stderr)
		if !strings.Contains(r.stderr, `lock "scheduler" is in use as an election (`) {
			t.Errorf("run %q: stderr %q does not say the name is an election's", flags, r.stderr)
		}
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran")
	}

	// Another candidate waits; unlock --force deposes the test, and the
	// candidate leads.
	c2 := newClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	type campaigned struct {
		lease *distlock.Lease
		err   error
	}
	next := make(chan campaigned, 1)
	go func() {
		l, err := c2.Election("scheduler").Campaign(ctx, "10.0.0.8:8080")
		next <- campaigned{l, err}
	}()
	eventually(t, "a candidate to queue", func() bool { return inspect(t, c, "scheduler").Queued == 1 })
	if st := statusJSON(t, srv, "scheduler"); st.Queued != 1 || st.Token != lease.Token() {
		t.Errorf("status %+v, want led by the test (term %d), 1 candidate queued", st, lease.Token())
	}
	r = run(t, "unlock", "--redis", srv.URL(), "--force", "scheduler")
	r.wantCode(t, 0)
	n := <-next
	if n.err != nil {
		t.Fatalf("the next candidate: %v", n.err)
	}
	t.Cleanup(func() { _ = n.lease.Unlock(context.Background()) })
	want := fmt.Sprintf("released scheduler (was held by leader %s, term %d, value %q); now held by leader %s, term %d, value %q\n",
		me, lease.Token(), "10.0.0.7:8080", me, n.lease.Token(), "10.0.0.8:8080")
	if r.stdout != want {
		t.Errorf("unlock --force printed %q, want %q", r.stdout, want)
	}
	select {
	case <-lease.Context().Done():
		if cause := context.Cause(lease.Context()); !errors.Is(cause, distlock.ErrLockLost) {
			t.Errorf("the deposed leader's lease ended with %v, want ErrLockLost", cause)
		}
	case <-time.After(testTimeout):
		t.Fatal("the deposed leader was not told that it lost the election")
	}
}
