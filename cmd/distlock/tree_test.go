//go:build linux

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// The tests of the process tree: the lock covers every process that the
// command starts, and every one of them is stopped when the lock is lost.
// They rest on distlock being a child subreaper, which only Linux has.

// TestRunLostKillsTree deletes the lock while the command runs: the
// command exits on SIGTERM at once, while the two processes it started,
// one in its process group and one that left it with setsid, ignore
// SIGTERM. Both are killed: distlock exits only once they are gone.
func TestRunLostKillsTree(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	pids, ready := filepath.Join(dir, "pids"), filepath.Join(dir, "ready")
	script := stubbornPair + `touch "$READY"; wait`
	p := start(t, []string{"PIDS=" + pids, "READY=" + ready},
		"run", "--redis", srv.URL(), "--ttl", "1s", "tree", "--", "sh", "-c", script)
	awaitFile(t, ready)
	if err := srv.Client(t).Del(context.Background(), redisstore.DefaultPrefix+"{tree}").Err(); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != exitLockLost {
		t.Fatalf("exit status %d, want %d; stderr:\n%s", code, exitLockLost, p.errOut())
	}
	for _, pid := range readPIDs(t, pids) {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d, started by the command and ignoring SIGTERM, still runs after distlock exited", pid)
		}
	}
}

// TestRunLeftoversHoldLock runs a command that starts a background job
// and a daemon (setsid) and exits at once: the lock stays held until both
// have exited, and run exits with the command's status then. With
// --kill-leftovers, they are stopped when the command exits.
func TestRunLeftoversHoldLock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	const waiter = `while [ ! -e "$GATE" ]; do sleep 0.02; done; echo $$ >>"$DONE"`
	script := `sh -c '` + waiter + `' &
setsid sh -c '` + waiter + `' &
exit 3`

	t.Run("held", func(t *testing.T) {
		dir := t.TempDir()
		gate, done := filepath.Join(dir, "gate"), filepath.Join(dir, "done")
		p := start(t, []string{"GATE=" + gate, "DONE=" + done},
			"run", "--redis", srv.URL(), "leftovers", "--", "sh", "-c", script)
		eventually(t, "distlock to say the command exited", func() bool {
			return strings.Contains(p.errOut(), "stays held")
		})
		if info := inspect(t, c, "leftovers"); !info.Locked {
			t.Fatal("the lock was released while the command's background job and daemon still run")
		}
		busy := run(t, "run", "--redis", srv.URL(), "--wait", "0", "--quiet", "leftovers", "--", "true")
		busy.wantCode(t, exitNotAcquired)
		select {
		case <-p.done:
			t.Fatal("distlock exited while the command's background job and daemon still run")
		default:
		}
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(); code != 3 {
			t.Fatalf("exit status %d, want the command's 3; stderr:\n%s", code, p.errOut())
		}
		if n := len(readPIDs(t, done)); n != 2 {
			t.Errorf("%d of the 2 leftover processes finished before distlock exited", n)
		}
		if info := inspect(t, c, "leftovers"); info.Locked {
			t.Errorf("lock still held after distlock exited: %+v", info)
		}
	})

	t.Run("killed", func(t *testing.T) {
		dir := t.TempDir()
		pids := filepath.Join(dir, "pids")
		script := stubbornPair + "exit 3"
		p := start(t, []string{"PIDS=" + pids},
			"run", "--redis", srv.URL(), "--ttl", "3s", "--kill-leftovers", "leftovers-killed", "--", "sh", "-c", script)
		if code := p.wait(); code != 3 {
			t.Fatalf("exit status %d, want the command's 3; stderr:\n%s", code, p.errOut())
		}
		for _, pid := range readPIDs(t, pids) {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("process %d left by the command still runs after distlock --kill-leftovers exited", pid)
			}
		}
		if p.errOut() != "" {
			t.Errorf("stderr %q, want nothing", p.errOut())
		}
	})
}

// stubbornPair is the start of a script that starts two processes that
// ignore SIGTERM, one in its process group and one that leaves it with
// setsid, and goes on once both have written their ids to $PIDS.
const stubbornPair = `: >>"$PIDS"
sh -c 'trap "" TERM; echo $$ >>"$PIDS"; while :; do sleep 0.05; done' &
setsid sh -c 'trap "" TERM; echo $$ >>"$PIDS"; while :; do sleep 0.05; done' &
while [ "$(wc -l <"$PIDS")" -lt 2 ]; do sleep 0.01; done
`

// readPIDs reads the process ids written one a line to path.
func readPIDs(t *testing.T, path string) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(readFile(t, path)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// TestRunLostTermsEachOnce deletes the lock while the command runs: the
// command, its child and grandchild (in its process group) and a great-
// grandchild that left the group with setsid each get exactly one
// SIGTERM, then SIGKILL after --kill-grace, since they stay. Each counts
// the SIGTERMs delivered to it (Perl runs its handler once per delivery).
func TestRunLostTermsEachOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	p := start(t, []string{"DIR=" + dir},
		"run", "--redis", srv.URL(), "--ttl", "3s", "terms", "--", "perl", "-e", termCounter)
	eventually(t, "the four processes of the command to be ready", func() bool {
		ready, _ := filepath.Glob(filepath.Join(dir, "ready.*"))
		return len(ready) == 4
	})
	if err := srv.Client(t).Del(context.Background(), redisstore.DefaultPrefix+"{terms}").Err(); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != exitLockLost {
		t.Fatalf("exit status %d, want %d; stderr:\n%s", code, exitLockLost, p.errOut())
	}
	ready, _ := filepath.Glob(filepath.Join(dir, "ready.*"))
	for _, r := range ready {
		pid := strings.TrimPrefix(filepath.Ext(r), ".")
		terms := filepath.Join(dir, "terms."+pid)
		n := 0
		if b, err := os.ReadFile(terms); err == nil {
			n = strings.Count(string(b), "\n")
		}
		if n != 1 {
			t.Errorf("process %s (%s) got %d SIGTERMs, want 1", pid, strings.TrimSpace(readFile(t, r)), n)
		}
	}
}

// termCounter is a Perl program that forks a child, which forks a
// grandchild, which forks a great-grandchild that calls setsid. Each
// process appends a line to $DIR/terms.PID for every SIGTERM delivered to
// it, and otherwise ignores it; each writes $DIR/ready.PID, its place in
// the tree, once its handler is set, then sleeps until killed.
const termCounter = `use POSIX ();
$SIG{TERM} = sub { open(my $f, ">>", "$ENV{DIR}/terms.$$") or die; print $f "TERM\n"; close $f };
my @names = ("the command", "its child", "its grandchild", "its great-grandchild, in a session of its own");
my $level = 0;
while ($level < 3) {
	my $pid = fork() // die "fork: $!";
	last if $pid;
	$level++;
	POSIX::setsid() if $level == 3;
}
open(my $f, ">", "$ENV{DIR}/ready.tmp.$$") or die;
print $f "$names[$level]\n";
close $f;
rename("$ENV{DIR}/ready.tmp.$$", "$ENV{DIR}/ready.$$") or die;
sleep 1 while 1;`
