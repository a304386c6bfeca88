//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
)

// The tests of run --shared and --exclusive, and of status, list and
// unlock on a read-write lock. As in fair_test.go, the distlock processes
// that queue run with the default --queue-timeout, --ttl and --kill-grace.

// holdRead takes the read side of the read-write lock name for the test,
// as an owner of its own, and releases it when the test ends.
func holdRead(t *testing.T, c *distlock.Client, name string, opts ...distlock.MutexOption) *distlock.Lease {
	t.Helper()
	lease, err := c.RWMutex(name, opts...).TryRLock(context.Background())
	if err != nil {
		t.Fatalf("read-lock %q: %v", name, err)
	}
	t.Cleanup(func() { _ = lease.Unlock(context.Background()) })
	return lease
}

// holdWrite takes the write side of the read-write lock name for the
// test, and releases it when the test ends.
func holdWrite(t *testing.T, c *distlock.Client, name string, opts ...distlock.MutexOption) *distlock.Lease {
	t.Helper()
	lease, err := c.RWMutex(name, opts...).TryLock(context.Background())
	if err != nil {
		t.Fatalf("write-lock %q: %v", name, err)
	}
	t.Cleanup(func() { _ = lease.Unlock(context.Background()) })
	return lease
}

// inspectRW returns the state of the read-write lock name.
func inspectRW(t *testing.T, c *distlock.Client, name string) distlock.RWLockInfo {
	t.Helper()
	info, err := c.RWMutex(name).Inspect(context.Background())
	if err != nil {
		t.Fatalf("inspect %q: %v", name, err)
	}
	return info
}

// awaitRWQueued waits until the queue of the read-write lock name holds
// readers readers and writers writers.
func awaitRWQueued(t *testing.T, c *distlock.Client, name string, readers, writers int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d readers and %d writers queued for %q", readers, writers, name), func() bool {
		info := inspectRW(t, c, name)
		return info.QueuedReaders == readers && info.QueuedWriters == writers
	})
}

// logLines returns the lines of the file path, which the commands append
// records to; none if it does not exist.
func logLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// touch creates the empty file path.
func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sharedOverlap is the command of a run --shared in TestRunSharedThenExclusive.
// It marks itself running with $DIR/in.$ID, then waits until the other
// reader's mark appears (exit status 3 if it does not within about 20
// seconds: the two did not run at once), then until $DIR/go exists. It
// logs an overlap if the writer's command runs meanwhile, and logs its end
// before it replaces its mark with $DIR/out.$ID. The other reader may
// be that quick only after both marks were there (the test touches go
// once it has seen both): a reader that has not looked yet accepts the
// other's out mark as well.
const sharedOverlap = `touch "$DIR/in.$ID"
i=0
until [ -e "$DIR/in.$OTHER" ] || [ -e "$DIR/out.$OTHER" ]; do
	i=$((i + 1))
	[ "$i" -le 400 ] || exit 3
	sleep 0.05
done
until [ -e "$DIR/go" ]; do sleep 0.05; done
[ ! -e "$DIR/writing" ] || echo "overlap: reader $ID with the writer" >>"$LOG"
echo "reader $ID" >>"$LOG"
touch "$DIR/out.$ID"
rm "$DIR/in.$ID"`

// exclusiveAlone is the command of the run --exclusive of
// TestRunSharedThenExclusive: it logs an overlap if a reader's mark is
// there, then logs itself.
const exclusiveAlone = `touch "$DIR/writing"
for f in "$DIR"/in.*; do
	if [ -e "$f" ]; then echo "overlap: writer with $f" >>"$LOG"; fi
done
echo writer >>"$LOG"
rm "$DIR/writing"`

// TestRunSharedThenExclusive runs two run --shared commands that each
// wait until the other runs (so they hold the lock at once), and a run
// --exclusive that arrives while they run: it waits, showing that two
// readers hold the lock and one writer is queued, and its command runs
// only once both readers' commands have ended, alone.
func TestRunSharedThenExclusive(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	dir := t.TempDir()
	logFile := filepath.Join(dir, "log")
	env := []string{"DIR=" + dir, "LOG=" + logFile}
	args := []string{"run", "--redis", srv.URL()}
	readers := map[string]*proc{}
	for id, other := range map[string]string{"a": "b", "b": "a"} {
		readers[id] = start(t, append(env, "ID="+id, "OTHER="+other),
			append(args, "--shared", "data", "--", "sh", "-c", sharedOverlap)...)
	}
	awaitFile(t, filepath.Join(dir, "in.a"))
	awaitFile(t, filepath.Join(dir, "in.b"))
	if info := inspectRW(t, c, "data"); info.Mode != "read" || len(info.Readers) != 2 || info.Writer != nil {
		t.Fatalf("lock state %+v while both readers run, want read-locked by 2 readers", info)
	}

	writer := start(t, env, append(args, "--exclusive", "data", "--", "sh", "-c", exclusiveAlone)...)
	awaitRWQueued(t, c, "data", 0, 1)
	awaitOutput(t, writer.stderr, "waiting for data")
	for _, want := range []string{"held shared by 2 readers", ", with 1 writer queued\n"} {
		if progress := writer.errOut(); !strings.Contains(progress, want) {
			t.Errorf("the writer's progress %q does not say %q", progress, want)
		}
	}
	if lines := logLines(t, logFile); len(lines) != 0 {
		t.Fatalf("log while the readers run and the writer waits: %q, want nothing", lines)
	}

	touch(t, filepath.Join(dir, "go"))
	for id, p := range readers {
		if code := p.wait(); code != 0 {
			t.Fatalf("reader %s: exit status %d (3: it never saw the other reader run); stderr:\n%s", id, code, p.errOut())
		}
	}
	if code := writer.wait(); code != 0 {
		t.Fatalf("writer: exit status %d; stderr:\n%s", code, writer.errOut())
	}
	lines := logLines(t, logFile)
	if len(lines) != 3 || !slices.Contains(lines[:2], "reader a") || !slices.Contains(lines[:2], "reader b") || lines[2] != "writer" {
		t.Errorf("log %q, want both readers' ends, then the writer alone", lines)
	}
}

// TestRunSharedBehindExclusive checks the order of the queue: a run
// --exclusive waits behind a reader (the test), and a run --shared that
// arrives then waits behind the writer, though the lock is only read: its
// command runs after the writer's, with a higher token.
func TestRunSharedBehindExclusive(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	lease := holdRead(t, c, "order")
	logFile := filepath.Join(t.TempDir(), "log")
	env := []string{"LOG=" + logFile}
	args := []string{"run", "--redis", srv.URL()}

	writer := start(t, env, append(args, "--exclusive", "order", "--", "sh", "-c", `echo "writer $DISTLOCK_TOKEN" >>"$LOG"`)...)
	awaitRWQueued(t, c, "order", 0, 1)
	reader := start(t, env, append(args, "--shared", "order", "--", "sh", "-c", `echo "reader $DISTLOCK_TOKEN" >>"$LOG"`)...)
	awaitRWQueued(t, c, "order", 1, 1)
	if lines := logLines(t, logFile); len(lines) != 0 {
		t.Fatalf("log %q while the test reads, want nothing: the reader must not pass the waiting writer", lines)
	}

	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*proc{writer, reader} {
		if code := p.wait(); code != 0 {
			t.Fatalf("%q: exit status %d; stderr:\n%s", p.cmd.Args[1:], code, p.errOut())
		}
	}
	lines := logLines(t, logFile)
	var writerToken, readerToken uint64
	if len(lines) != 2 {
		t.Fatalf("log %q, want the writer, then the reader", lines)
	}
	if _, err := fmt.Sscanf(lines[0], "writer %d", &writerToken); err != nil {
		t.Fatalf("log %q, want the writer first: %v", lines, err)
	}
	if _, err := fmt.Sscanf(lines[1], "reader %d", &readerToken); err != nil {
		t.Fatalf("log %q, want the reader second: %v", lines, err)
	}
	if !(lease.Token() < writerToken && writerToken < readerToken) {
		t.Errorf("tokens: the test's %d, the writer's %d, the reader's %d; want them increasing", lease.Token(), writerToken, readerToken)
	}
}

// TestRunWrongKindRW runs distlock as one kind of lock on a name held as
// another, read-write on one side: it fails at once with status 78 and a
// line that names the kind in use, does not run the command, and leaves
// the lock as it was.
func TestRunWrongKindRW(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	const (
		plain = "a mutex (without --fair, --shared, --exclusive or --semaphore)"
		fair  = "a fair-mutex (--fair)"
		rw    = "an rwmutex (--shared/--exclusive)"
	)
	tests := []struct {
		name string
		held string // plain, fair, read or write
		args []string
		want string
	}{
		{"shared on plain", "plain", []string{"--shared"}, plain},
		{"exclusive on plain, wait 0", "plain", []string{"--exclusive", "--wait", "0"}, plain},
		{"plain on shared", "read", nil, rw},
		{"plain on exclusive, wait 0", "write", []string{"--wait", "0"}, rw},
		{"fair on exclusive", "write", []string{"--fair"}, rw},
		{"fair on shared, wait 0", "read", []string{"--fair", "--wait", "0"}, rw},
		{"exclusive on fair", "fair", []string{"--exclusive"}, fair},
		{"shared on fair, wait 0", "fair", []string{"--shared", "--wait", "0"}, fair},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "kind-" + itoa(i)
			var lease *distlock.Lease
			switch tt.held {
			case "plain":
				lease = hold(t, c, name)
			case "fair":
				lease = holdFair(t, c, name)
			case "read":
				lease = holdRead(t, c, name)
			case "write":
				lease = holdWrite(t, c, name)
			}
			ran := filepath.Join(t.TempDir(), "ran")
			args := append([]string{"run", "--redis", srv.URL()}, tt.args...)
			r := run(t, append(args, name, "--", "touch", ran)...)
			r.wantCode(t, exitWrongKind)
			if want := fmt.Sprintf("distlock run: lock %q is in use as %s; use the same kind everywhere\n", name, tt.want); r.stderr != want {
				t.Errorf("stderr %q, want %q", r.stderr, want)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Error("the command ran")
			}
			if err := lease.Context().Err(); err != nil {
				t.Errorf("the test's lease ended: %v", context.Cause(lease.Context()))
			}
			switch tt.held {
			case "plain", "fair":
				info := inspect(t, c, name)
				if !info.Locked || info.Token != lease.Token() || (info.Kind == distlock.KindFairMutex) != (tt.held == "fair") || info.Queued != 0 {
					t.Errorf("lock state %+v, want still held by the test (token %d) as a %s mutex, nothing queued",
						info, lease.Token(), tt.held)
				}
			case "read":
				info := inspectRW(t, c, name)
				if info.Mode != "read" || len(info.Readers) != 1 || info.Readers[0].Token != lease.Token() ||
					info.QueuedReaders+info.QueuedWriters != 0 {
					t.Errorf("lock state %+v, want still read by the test alone (token %d), nothing queued", info, lease.Token())
				}
			case "write":
				info := inspectRW(t, c, name)
				if info.Mode != "write" || info.Writer == nil || info.Writer.Token != lease.Token() || len(info.Readers) != 0 ||
					info.QueuedReaders+info.QueuedWriters != 0 {
					t.Errorf("lock state %+v, want still written by the test (token %d), nothing queued", info, lease.Token())
				}
			}
		})
	}
}

// TestRunRWUsage checks that --shared and --exclusive together, or either
// with --fair, are usage errors that say why, and take nothing; and that
// --queue-timeout alone says what it goes with.
func TestRunRWUsage(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	const (
		both = "--shared and --exclusive cannot go together: --shared takes the read side of the lock, --exclusive its write side"
		fair = "--fair cannot go with --shared or --exclusive: a read-write lock already serves its waiters in order"
	)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--shared", "--exclusive"}, both},
		{[]string{"--exclusive", "--wait", "0", "--shared"}, both},
		{[]string{"--fair", "--shared"}, fair},
		{[]string{"--exclusive", "--fair"}, fair},
		{[]string{"--fair", "--shared", "--exclusive"}, both},
		{[]string{"--queue-timeout", "10s"}, "--queue-timeout is for a lock with a queue: add --fair, --shared, --exclusive or --semaphore, or drop --queue-timeout"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			ran := filepath.Join(t.TempDir(), "ran")
			args := append([]string{"run", "--redis", srv.URL()}, tt.args...)
			r := run(t, append(args, "usage", "--", "touch", ran)...)
			r.wantCode(t, exitUsage)
			if want := "distlock run: " + tt.want + "\n"; r.stderr != want {
				t.Errorf("stderr %q, want %q", r.stderr, want)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Error("the command ran")
			}
		})
	}
	if info := inspectRW(t, c, "usage"); info.LastToken != 0 {
		t.Errorf("lock state %+v: a usage error took the lock", info)
	}
}

// TestRunMode checks DISTLOCK_MODE: "shared" with --shared, "exclusive"
// with --exclusive (and --queue-timeout, which goes with either), and
// unset otherwise, even if distlock has one in its environment; and that
// DISTLOCK_TOKEN is the token of the hold.
func TestRunMode(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--shared"}, "shared"},
		{[]string{"--exclusive", "--queue-timeout", "10s"}, "exclusive"},
		{[]string{"--shared", "--wait", "0"}, "shared"},
		{nil, "unset"},
		{[]string{"--fair"}, "unset"},
	}
	for i, tt := range tests {
		t.Run(strings.Join(append([]string{"run"}, tt.args...), " "), func(t *testing.T) {
			name := "mode-" + itoa(i)
			args := append([]string{"run", "--redis", srv.URL()}, tt.args...)
			r := distlockEnv(t, []string{"DISTLOCK_MODE=inherited"},
				append(args, name, "--", "sh", "-c", `echo "${DISTLOCK_MODE-unset} $DISTLOCK_TOKEN"`)...)
			r.wantCode(t, 0)
			var mode string
			var token uint64
			if _, err := fmt.Sscanf(r.stdout, "%s %d", &mode, &token); err != nil {
				t.Fatalf("the command printed %q: %v", r.stdout, err)
			}
			if mode != tt.want {
				t.Errorf("DISTLOCK_MODE = %q, want %q", mode, tt.want)
			}
			if last := inspect(t, c, name).LastToken; token == 0 || token != last {
				t.Errorf("DISTLOCK_TOKEN = %d, want the lock's last token %d", token, last)
			}
		})
	}
}

// TestRunRWWaitZero checks that --wait 0 never queues on a read-write
// lock: --shared shares the read side with a reader, but fails (status
// 75) while a writer holds the lock, and --exclusive fails while a reader
// does; each says how the lock is held.
func TestRunRWWaitZero(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	host, _ := os.Hostname()
	me := fmt.Sprintf("%s/%d", host, os.Getpid())

	holdWrite(t, c, "written")
	r := run(t, "run", "--redis", srv.URL(), "--shared", "--wait", "0", "written", "--", "true")
	r.wantCode(t, exitNotAcquired)
	wantOneLine(t, r.stderr)
	if want := `lock "written" is held exclusively by ` + me + " for "; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q does not contain %q", r.stderr, want)
	}

	holdRead(t, c, "read")
	r = run(t, "run", "--redis", srv.URL(), "--exclusive", "--wait", "0", "read", "--", "true")
	r.wantCode(t, exitNotAcquired)
	wantOneLine(t, r.stderr)
	if want := `lock "read" is held shared by ` + me + " for "; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q does not contain %q", r.stderr, want)
	}
	// The reader of --shared --wait 0 shares it with the test.
	r = run(t, "run", "--redis", srv.URL(), "--shared", "--wait", "0", "read", "--", "sh", "-c", "echo $DISTLOCK_MODE")
	r.wantCode(t, 0)
	if r.stdout != "shared\n" {
		t.Errorf("the command printed %q, want shared", r.stdout)
	}
	for _, name := range []string{"written", "read"} {
		if info := inspectRW(t, c, name); info.QueuedReaders+info.QueuedWriters != 0 {
			t.Errorf("lock state %+v: --wait 0 queued", info)
		}
	}
}

// TestStatusRW checks what status, status --json, list and list --json
// show of a read-write lock written by the test with a reader and a
// writer queued, then read by two distlock processes with a writer
// queued, then free; and what a queued reader shows while it waits.
func TestStatusRW(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	host, _ := os.Hostname()
	lease := holdWrite(t, c, "ds", distlock.WithTTL(30*time.Second))

	st := statusJSON(t, srv, "ds")
	switch w := st.Writer; {
	case st.Kind != "rwmutex" || !st.Locked || st.Mode != "write" || st.Fair || st.Waiters != 0:
		t.Errorf("status %+v, want an rwmutex held in write mode", st)
	case w == nil || w.PID != os.Getpid() || w.Host != host || w.ID == "" || w.Token != lease.Token() || w.Holds != 1:
		t.Errorf("writer %+v, want pid %d on %s with token %d, 1 hold", w, os.Getpid(), host, lease.Token())
	case w.TTLMillis <= 0 || w.TTLMillis > 30000:
		t.Errorf("writer's ttl_ms %d, want in (0, 30000]", w.TTLMillis)
	case st.Holder == nil || *st.Holder != w.holderState || st.Token != w.Token || st.Holds != 1 || st.TTLMillis != w.TTLMillis:
		t.Errorf("holder %+v, token %d, holds %d, ttl_ms %d, want those of the writer %+v",
			st.Holder, st.Token, st.Holds, st.TTLMillis, w)
	case len(st.Readers) != 0 || st.Queued != 0 || st.QueuedReaders != 0 || st.QueuedWriters != 0:
		t.Errorf("status %+v, want no readers, nothing queued", st)
	}

	// Two readers queue, then a writer.
	dir := t.TempDir()
	args := []string{"run", "--redis", srv.URL()}
	goFile := filepath.Join(dir, "go")
	var readers []*proc
	for i := range 2 {
		out := filepath.Join(dir, "out"+itoa(i))
		readers = append(readers, start(t, []string{"OUT=" + out, "GO=" + goFile},
			append(args, "--shared", "ds", "--", "sh", "-c", holdUntilGo)...))
		awaitRWQueued(t, c, "ds", i+1, 0)
		if i == 0 {
			awaitOutput(t, readers[0].stderr, "waiting for ds")
			progress := readers[0].errOut()
			for _, want := range []string{fmt.Sprintf("held exclusively by %s/%d, ttl ", host, os.Getpid()), ", with 1 reader queued\n"} {
				if !strings.Contains(progress, want) {
					t.Errorf("the reader's progress %q does not say %q", progress, want)
				}
			}
		}
	}
	writer := start(t, nil, append(args, "--exclusive", "ds", "--", "true")...)
	awaitRWQueued(t, c, "ds", 2, 1)
	if st := statusJSON(t, srv, "ds"); st.Kind != "rwmutex" || st.Fair || st.Mode != "write" ||
		st.QueuedReaders != 2 || st.QueuedWriters != 1 || st.Queued != 3 || st.Waiters != 0 {
		t.Errorf("status %+v, want an rwmutex (not fair) held in write mode, 2 readers and 1 writer queued", st)
	}
	r := run(t, "status", "--redis", srv.URL(), "ds")
	r.wantCode(t, 0)
	for _, want := range []string{
		"state:      locked\n", "kind:       rwmutex\n", "mode:       write\n",
		fmt.Sprintf("writer:     %s/%d (id ", host, os.Getpid()),
		fmt.Sprintf("token:      %d\n", lease.Token()), "queued:     2 readers, 1 writer\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status does not contain %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "reader:") || strings.Contains(r.stdout, "waiters:") {
		t.Errorf("status of a written lock shows readers or a plain lock's waiters:\n%s", r.stdout)
	}

	// The release lets both readers in; the writer still waits.
	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	tokens := map[int]uint64{} // by pid
	for i, p := range readers {
		out := filepath.Join(dir, "out"+itoa(i))
		awaitFile(t, out)
		var name string
		var token uint64
		if _, err := fmt.Sscanf(readFile(t, out), "%s %d", &name, &token); err != nil {
			t.Fatalf("reader %d's command got %q: %v", i, readFile(t, out), err)
		}
		tokens[p.cmd.Process.Pid] = token
	}
	st = statusJSON(t, srv, "ds")
	if st.Kind != "rwmutex" || !st.Locked || st.Mode != "read" || st.Writer != nil || st.Holder != nil ||
		st.Token != 0 || st.QueuedReaders != 0 || st.QueuedWriters != 1 || st.Queued != 1 {
		t.Errorf("status %+v, want an rwmutex held in read mode, no holder or writer, 1 writer queued", st)
	}
	if len(st.Readers) != 2 {
		t.Fatalf("readers %+v, want 2", st.Readers)
	}
	for _, rd := range st.Readers {
		if want, ok := tokens[rd.PID]; !ok || rd.Token != want || rd.Host != host || rd.Holds != 1 || rd.TTLMillis <= 0 {
			t.Errorf("reader %+v, want one of the distlock processes %v (pid: token), 1 hold, a lease", rd, tokens)
		}
	}
	r = run(t, "status", "--redis", srv.URL(), "ds")
	r.wantCode(t, 0)
	want := []string{"state:      locked\n", "kind:       rwmutex\n", "mode:       read\n", "readers:    2\n", "queued:     0 readers, 1 writer\n"}
	for pid, token := range tokens {
		want = append(want, fmt.Sprintf("reader:     %s/%d (id ", host, pid), fmt.Sprintf(", token %d\n", token))
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("status does not contain %q:\n%s", w, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "writer:") {
		t.Errorf("status of a shared lock shows a writer:\n%s", r.stdout)
	}

	r = run(t, "list", "--redis", srv.URL())
	r.wantCode(t, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME KIND HOLDER SINCE TTL TOKEN WAITERS" {
		t.Fatalf("list printed:\n%s", r.stdout)
	}
	fields := strings.Fields(lines[1])
	if len(fields) != 10 || fields[0] != "ds" || fields[1] != "rwmutex" || fields[2] != "read" || fields[3] != "2" || fields[4] != "readers" ||
		fields[8] != itoa64(max(tokens[readers[0].cmd.Process.Pid], tokens[readers[1].cmd.Process.Pid])) || fields[9] != "1" {
		t.Errorf("list line %q, want ds, rwmutex read by 2 readers, the higher token, 1 waiter", lines[1])
	}
	r = run(t, "list", "--redis", srv.URL(), "--json")
	r.wantCode(t, 0)
	var states []lockState
	if err := json.Unmarshal([]byte(r.stdout), &states); err != nil {
		t.Fatalf("list --json printed %q: %v", r.stdout, err)
	}
	if len(states) != 1 || states[0].Kind != "rwmutex" || states[0].Mode != "read" || len(states[0].Readers) != 2 || states[0].QueuedWriters != 1 {
		t.Errorf("list --json = %+v, want ds, rwmutex read by 2 readers, 1 writer queued", states)
	}

	touch(t, goFile)
	for _, p := range append(readers, writer) {
		if code := p.wait(); code != 0 {
			t.Fatalf("%q: exit status %d; stderr:\n%s", p.cmd.Args[1:], code, p.errOut())
		}
	}
	st = statusJSON(t, srv, "ds")
	if st.Kind != "" || st.Locked || st.Mode != "" || st.Writer != nil || len(st.Readers) != 0 || st.Queued != 0 {
		t.Errorf("status %+v, want free, nothing queued", st)
	}
	for _, token := range tokens {
		if st.LastToken <= token {
			t.Errorf("last token %d, want above the readers' %d: the writer took the lock last", st.LastToken, token)
		}
	}
}

// TestUnlockForceRW force-unlocks a read-write lock read by two owners of
// the test, with a distlock process queued to write: unlock says whom it
// took the lock from and that the writer holds it now, the writer's
// command runs, and both readers learn that they lost the lock.
func TestUnlockForceRW(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	forceUnlockHandsOver(t, srv, forceUnlockCase{
		name: "stuck-rw",
		held: [2]*distlock.Lease{
			holdRead(t, c, "stuck-rw", distlock.WithTTL(time.Second)),
			holdRead(t, c, "stuck-rw", distlock.WithTTL(time.Second)),
		},
		waiterFlags: []string{"--exclusive"},
		awaitQueued: func() { awaitRWQueued(t, c, "stuck-rw", 0, 1) },
		released:    "was held shared by 2 readers",
		item:        "%s token %d",
		now:         "now held exclusively by %s, token %d",
	})
}

func itoa64(n uint64) string { return fmt.Sprint(n) }
