//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdstore"
	"github.com/distlock/distlock/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The tests of the command on etcd: members started in the test process
// by etcdtest, and the distlock binary pointed at them with --store or
// $DISTLOCK_STORE, with the defaults a user gets.

// etcdURL is the etcd:// URL of every member of cl.
func etcdURL(cl *etcdtest.Cluster) string {
	addrs := make([]string, 0, len(cl.Endpoints()))
	for _, ep := range cl.Endpoints() {
		addrs = append(addrs, strings.TrimPrefix(ep, "http://"))
	}
	return "etcd://" + strings.Join(addrs, ",")
}

// newEtcdClient returns a distlock client on cl, with the default prefix,
// closed when the test ends.
func newEtcdClient(t *testing.T, cl *etcdtest.Cluster) *distlock.Client {
	t.Helper()
	c := distlock.New(etcdstore.New(cl.Client(t)), distlock.WithLogger(nil))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// startHolder starts distlock run with args (the flags and the lock's
// name) on a command that writes its token to a file and runs until the
// test ends or it is stopped. It returns once the command runs, with the
// token.
func startHolder(t *testing.T, env []string, args ...string) (*proc, uint64) {
	t.Helper()
	dir := t.TempDir()
	ready, token := filepath.Join(dir, "ready"), filepath.Join(dir, "token")
	env = append(env, "READY="+ready, "TOKEN="+token)
	args = append(append([]string{"run"}, args...), "--", "sh", "-c",
		`echo "$DISTLOCK_TOKEN" >"$TOKEN"; touch "$READY"; while :; do sleep 0.05; done`)
	p := start(t, env, args...)
	awaitFile(t, ready)
	tok, err := strconv.ParseUint(strings.TrimSpace(readFile(t, token)), 10, 64)
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	return p, tok
}

// wantStderr fails the test unless r's stderr is one line that contains
// each of want.
func wantStderr(t *testing.T, r result, want ...string) {
	t.Helper()
	wantOneLine(t, r.stderr)
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr %q does not contain %q", r.stderr, w)
		}
	}
}

// TestEtcdRunStatusListUnlock runs the command's everyday uses on three
// etcd members, named in one URL: run holds a lock while its command
// runs; a second run with --wait 0 is refused (75) and names the holder;
// a second run with the default --wait (forever) waits, and runs once
// the first is done, with a higher token; status and list show the
// holder in text and JSON; unlock --force takes a lock from its run,
// whose command is stopped (70); and the commands still work with the
// first member of the URL down.
func TestEtcdRunStatusListUnlock(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 3)
	url := etcdURL(cl)
	c := newEtcdClient(t, cl)
	host, _ := os.Hostname()

	release := filepath.Join(t.TempDir(), "release")
	dir := t.TempDir()
	ready, token1 := filepath.Join(dir, "ready"), filepath.Join(dir, "token1")
	first := start(t, []string{"READY=" + ready, "TOKEN=" + token1, "RELEASE=" + release},
		"run", "--store", url, "job", "--", "sh", "-c",
		`echo "$DISTLOCK_TOKEN" >"$TOKEN"; touch "$READY"; while [ ! -e "$RELEASE" ]; do sleep 0.05; done`)
	awaitFile(t, ready)
	token, err := strconv.ParseUint(strings.TrimSpace(readFile(t, token1)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	holder := fmt.Sprintf("%s/%d", host, first.cmd.Process.Pid)
	if info := inspect(t, c, "job"); !info.Locked || info.Holder.PID != first.cmd.Process.Pid || info.Token != token {
		t.Fatalf("the library sees %+v, want job held by %s with token %d", info, holder, token)
	}

	checkHeldNow(t, url, "job", holder)

	token2 := filepath.Join(t.TempDir(), "token2")
	second := start(t, []string{"TOKEN=" + token2}, "run", "--store", url, "job", "--", "sh", "-c", `echo "$DISTLOCK_TOKEN" >"$TOKEN"`)
	eventually(t, "the second run to wait", func() bool {
		return strings.Contains(readFile(t, second.stderr), "waiting for job")
	})

	checkStatusHeld(t, url, "job", first, host, token)

	hold(t, c, "other")
	r := run(t, "list", "--store", url)
	r.wantCode(t, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "job ") ||
		!strings.Contains(lines[1], holder) || !strings.HasPrefix(lines[2], "other ") {
		t.Errorf("list printed:\n%s\nwant job held by %s, and other", r.stdout, holder)
	}
	checkListJSON(t, url, "j*", first, holder)

	releaseFirst(t, release, first, second)
	if next, err := strconv.ParseUint(strings.TrimSpace(readFile(t, token2)), 10, 64); err != nil || next <= token {
		t.Errorf("second token %d (%v), want above the first's %d", next, err, token)
	}

	checkForcedUnlock(t, url, host, "revoked")

	cl.Members()[0].Kill()
	if st := statusJSONOf(t, "--store", url, "other"); !st.Locked || st.Holder == nil || st.Holder.PID != os.Getpid() {
		t.Errorf("with the first member down, status --json = %+v, want other held by this process", st)
	}
	run(t, "run", "--store", url, "--wait", "0", "third", "--", "true").wantCode(t, 0)
}

// TestEtcdStoreEnv checks $DISTLOCK_STORE and the precedence of the ways
// to name a store: a flag (--store or --redis) over the environment, and
// $DISTLOCK_STORE over $REDIS_URL.
func TestEtcdStoreEnv(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	url := etcdURL(cl)
	hold(t, newEtcdClient(t, cl), "env")
	down := closedAddr(t)

	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"DISTLOCK_STORE", []string{storeEnv + "=" + url}, []string{"status", "--json", "env"}},
		{"over REDIS_URL", []string{storeEnv + "=" + url, "REDIS_URL=redis://" + down}, []string{"status", "--json", "env"}},
		{"--store over DISTLOCK_STORE", []string{storeEnv + "=etcd://" + down}, []string{"status", "--store", url, "--json", "env"}},
		{"--store before the command", []string{storeEnv + "=etcd://" + down}, []string{"--store", url, "status", "--json", "env"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := distlockEnv(t, tc.env, tc.args...)
			r.wantCode(t, 0)
			var st lockState
			if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || !st.Locked || st.Holder == nil || st.Holder.PID != os.Getpid() {
				t.Errorf("status printed %q (%v), want env held by this process", r.stdout, err)
			}
		})
	}
	t.Run("--redis over DISTLOCK_STORE", func(t *testing.T) {
		r := distlockEnv(t, []string{storeEnv + "=" + url}, "status", "--redis", "redis://"+down, "env")
		r.wantCode(t, exitUnavailable)
		wantStderr(t, r, "cannot reach Redis at "+down)
	})
}

// TestStoreURLErrors checks the usage errors (64) of the ways to name a
// store: --store with --redis or --redlock, malformed etcd URLs, a
// scheme that names no store, an etcd URL where only Redis goes, TLS
// files for a plain-text URL or that cannot be read, and two prefixes.
// Each is one line that says what is wrong and where the URL came from,
// before anything is dialled, and never shows the password.
func TestStoreURLErrors(t *testing.T) {
	t.Parallel()
	addr := closedAddr(t)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"--store and --redis", nil, []string{"--store", "etcd://" + addr, "--redis", "redis://" + addr},
			[]string{"--store and --redis exclude each other"}},
		{"--store and --redis, apart", nil, []string{"--redis", "redis://" + addr, "status", "--store", "etcd://" + addr},
			[]string{"--store and --redis exclude each other"}},
		{"--store and --redlock", nil, []string{"--store", "etcd://" + addr, "--redlock", "redis://" + addr},
			[]string{"--store and --redlock exclude each other"}},
		{"unknown scheme", nil, []string{"--store", "http://u:sekret@" + addr}, []string{"invalid store URL in --store", "etcd://"}},
		{"unknown scheme in DISTLOCK_STORE", []string{storeEnv + "=mongodb://" + addr}, nil, []string{"invalid store URL in $" + storeEnv}},
		{"etcd URL in --redis", nil, []string{"--redis", "etcd://" + addr}, []string{"invalid Redis URL in --redis", "with --store"}},
		{"etcd URL in REDIS_URL", []string{"REDIS_URL=etcd://" + addr}, nil, []string{"invalid Redis URL in $REDIS_URL", "$" + storeEnv}},
		{"no host", nil, []string{"--store", "etcd://"}, []string{"invalid etcd URL in --store", "missing host"}},
		{"empty host in list", nil, []string{"--store", "etcd://u:sekret@" + addr + ",,"}, []string{"invalid etcd URL in --store", "missing host"}},
		{"bad port", nil, []string{"--store", "etcd://u:sekret@127.0.0.1:99999"}, []string{"invalid etcd URL in --store", "port"}},
		{"IPv6 without brackets", nil, []string{"--store", "etcd://::1:2379"}, []string{"brackets"}},
		{"user without password", nil, []string{"--store", "etcd://root@" + addr}, []string{"USER:PASSWORD"}},
		{"password without user", nil, []string{"--store", "etcd://:sekret@" + addr}, []string{"USER:PASSWORD"}},
		{"path", nil, []string{"--store", "etcds://u:sekret@" + addr + "/locks"}, []string{"unexpected path", "?prefix="}},
		{"unknown parameter", nil, []string{"--store", "etcd://u:sekret@" + addr + "/?dial_timeout=1s"}, []string{`unknown parameter "dial_timeout"`}},
		{"empty prefix", nil, []string{"--store", "etcd://" + addr + "/?prefix="}, []string{"prefix"}},
		{"two prefixes", nil, []string{"--store", "etcd://" + addr + "/?prefix=a/", "--prefix", "b/"}, []string{`--prefix "b/"`, `"a/"`, "differ"}},
		{"TLS files for etcd://", nil, []string{"--store", "etcd://" + addr, "--tls-ca", "/nonexistent"}, []string{"plain text", "etcds://"}},
		{"TLS files for redis://", nil, []string{"--redis", "redis://" + addr, "--tls-ca", "/nonexistent"}, []string{"plain text", "rediss://"}},
		{"unreadable CA", nil, []string{"--store", "etcds://" + addr, "--tls-ca", "/nonexistent/ca.pem"}, []string{"--tls-ca", "/nonexistent/ca.pem: no such file"}},
		{"cert without key", nil, []string{"--store", "etcds://" + addr, "--tls-cert", "/nonexistent/c.pem"}, []string{"--tls-cert needs --tls-key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := tc.args
			if !strings.Contains(strings.Join(args, " "), "status") {
				args = append([]string{"status"}, args...)
			}
			r := distlockEnv(t, tc.env, append(args, "name")...)
			wantFailure(t, r, exitUsage, tc.want...)
		})
	}
}

// TestEtcdDown points every command at an etcd address where nothing
// listens, with and without a user: each fails with status 69 and says
// it cannot reach etcd there, without the password, well within its
// timeouts (the test's bound is testTimeout).
func TestEtcdDown(t *testing.T) {
	t.Parallel()
	addr := closedAddr(t)
	for _, url := range []string{"etcd://" + addr, "etcd://root:sekret@" + addr} {
		for _, args := range [][]string{
			{"run", "--store", url, "job", "--", "true"},
			{"status", "--store", url, "job"},
			{"list", "--store", url},
			{"unlock", "--store", url, "--force", "job"},
		} {
			t.Run(args[0]+"/"+strings.Split(url, "@")[0], func(t *testing.T) {
				t.Parallel()
				r := run(t, args...)
				wantFailure(t, r, exitUnavailable, "cannot reach etcd at "+addr, "connection refused")
			})
		}
	}
}

// The users of TestEtcdAuth and their passwords; the locker's has the
// characters that a URL's user information escapes.
const (
	rootPassword     = "r00t-sekret"
	lockerPassword   = "p@ss:w/rd-sekret"
	lockerEscaped    = "p%40ss%3Aw%2Frd-sekret"
	strangerPassword = "stranger-sekret"
)

// enableAuth turns etcd's authentication on in cl, through its client
// API: a root user, a user "locker" whose role may read and write under
// distlock's default prefix only, and a user "stranger" whose role may
// read and write under "other/" only.
func enableAuth(t *testing.T, cl *etcdtest.Cluster) {
	t.Helper()
	cli := cl.Client(t)
	ctx := t.Context()
	readWrite := clientv3.PermissionType(clientv3.PermReadWrite)
	for _, step := range []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", rootPassword); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "locker"); return err },
		func() error {
			p := etcdstore.DefaultPrefix
			_, err := cli.RoleGrantPermission(ctx, "locker", p, clientv3.GetPrefixRangeEnd(p), readWrite)
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "locker", lockerPassword); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "locker", "locker"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "stranger"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "stranger", "other/", clientv3.GetPrefixRangeEnd("other/"), readWrite)
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "stranger", strangerPassword); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "stranger", "stranger"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("enable authentication: %v", err)
		}
	}
}

// TestEtcdAuth runs the commands on an etcd with authentication on, as a
// user whose role may only read and write under distlock's prefix: run
// holds a lock, status and list show it, unlock --force takes it, also
// with the URL in $DISTLOCK_STORE. A wrong password, no user, a user not
// allowed under the prefix, or another --prefix are refused with status
// 77 and a message that says which; no output shows a password.
func TestEtcdAuth(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	enableAuth(t, cl)
	addr := strings.TrimPrefix(cl.Endpoints()[0], "http://")
	locker := "etcd://locker:" + lockerEscaped + "@" + addr
	host, _ := os.Hostname()

	holder, token := startHolder(t, nil, "--store", locker, "authed")
	st := statusJSONOf(t, "--store", locker, "authed")
	if !st.Locked || st.Holder == nil || st.Holder.PID != holder.cmd.Process.Pid || st.Token != token {
		t.Errorf("status --json = %+v, want authed held by %d with token %d", st, holder.cmd.Process.Pid, token)
	}
	outputs := []result{
		run(t, "list", "--store", locker),
		distlockEnv(t, []string{storeEnv + "=" + locker}, "status", "authed"),
	}
	for _, r := range outputs {
		r.wantCode(t, 0)
		if !strings.Contains(r.stdout, fmt.Sprintf("%s/%d", host, holder.cmd.Process.Pid)) {
			t.Errorf("output %q does not show the holder", r.stdout)
		}
	}
	r := distlockEnv(t, []string{storeEnv + "=" + locker}, "unlock", "--force", "authed")
	r.wantCode(t, 0)
	if code := holder.wait(); code != exitLockLost {
		t.Errorf("the unlocked run: exit %d, want %d; stderr %q", code, exitLockLost, holder.errOut())
	}
	outputs = append(outputs, r)

	for _, r := range outputs {
		if strings.Contains(r.stdout+r.stderr, "sekret") {
			t.Errorf("a command printed a password: stdout %q, stderr %q", r.stdout, r.stderr)
		}
	}

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"wrong password/run", []string{"run", "--store", "etcd://locker:wrong-sekret@" + addr, "job", "--", "true"},
			[]string{"etcd at " + addr + " refused the credentials", "authentication failed"}},
		{"wrong password/list", []string{"list", "--store", "etcd://locker:wrong-sekret@" + addr},
			[]string{"etcd at " + addr + " refused the credentials", "authentication failed"}},
		{"no user/status", []string{"status", "--store", "etcd://" + addr, "job"},
			[]string{"etcd at " + addr + " asks for a user name and password"}},
		{"no user/unlock", []string{"unlock", "--force", "--store", "etcd://" + addr, "job"},
			[]string{"etcd at " + addr + " asks for a user name and password"}},
		{"user not allowed under the prefix/run", []string{"run", "--store", "etcd://stranger:" + strangerPassword + "@" + addr, "job", "--", "true"},
			[]string{"refused a request to this user", `prefix "` + etcdstore.DefaultPrefix + `"`, "permission denied"}},
		{"user not allowed under the prefix/status", []string{"status", "--store", "etcd://stranger:" + strangerPassword + "@" + addr, "job"},
			[]string{"refused a request to this user", `prefix "` + etcdstore.DefaultPrefix + `"`, "permission denied"}},
		{"another prefix/unlock", []string{"unlock", "--force", "--store", locker, "--prefix", "other/", "job"},
			[]string{"refused a request to this user", `prefix "other/"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, tc.args...)
			r.wantCode(t, exitNoPerm)
			wantStderr(t, r, tc.want...)
			if strings.Contains(r.stdout+r.stderr, "sekret") {
				t.Errorf("a command printed a password: stdout %q, stderr %q", r.stdout, r.stderr)
			}
		})
	}
}

// TestEtcdTLS runs the commands on an etcd member that serves TLS only
// and asks for a client certificate, with etcds:// and --tls-ca,
// --tls-cert and --tls-key (after the command, or before it with the
// URL in $DISTLOCK_STORE). Without the CA, the server's certificate is
// refused; an etcds:// URL of a plain-text member fails within a few
// seconds, saying it is about TLS; both with status 69.
func TestEtcdTLS(t *testing.T) {
	t.Parallel()
	m := etcdtest.StartTLSMember(t)
	url := "etcds://" + m.Addr()
	files := []string{"--tls-ca", m.CAFile, "--tls-cert", m.CertFile, "--tls-key", m.KeyFile}

	holder, token := startHolder(t, nil, append(append([]string{"--store", url}, files...), "secure")...)
	st := statusJSONOf(t, "--store", url, "secure", files...)
	if !st.Locked || st.Holder == nil || st.Holder.PID != holder.cmd.Process.Pid || st.Token != token {
		t.Errorf("status --json = %+v, want secure held by %d with token %d", st, holder.cmd.Process.Pid, token)
	}
	r := distlockEnv(t, []string{storeEnv + "=" + url}, append(files, "unlock", "--force", "secure")...)
	r.wantCode(t, 0)
	if code := holder.wait(); code != exitLockLost {
		t.Errorf("the unlocked run: exit %d, want %d; stderr %q", code, exitLockLost, holder.errOut())
	}

	r = run(t, "status", "--store", url, "--tls-cert", m.CertFile, "--tls-key", m.KeyFile, "secure")
	r.wantCode(t, exitUnavailable)
	wantStderr(t, r, "cannot reach etcd at "+m.Addr(), "TLS handshake failed", "certificate")

	plain := etcdtest.Start(t, 1)
	plainAddr := strings.TrimPrefix(plain.Endpoints()[0], "http://")
	r = run(t, "status", "--store", "etcds://"+plainAddr, "secure")
	r.wantCode(t, exitUnavailable)
	wantStderr(t, r, "cannot reach etcd at "+plainAddr, "TLS", "etcds:// asks for TLS; use etcd://")
}

// TestEtcdQueuedKinds runs the kinds of lock that have a queue (--fair,
// --shared, --exclusive, --semaphore), --once-per and the permits
// command on etcd. Each that the store reports unsupported
// (distlock.ErrUnsupported, before any request) must fail with status 64
// and a message that names the flag and says the store does not support
// it, and leave status working on the name; each that it supports must
// work as on Redis: a run holds the lock, a conflicting run with --wait 0
// is refused (75), status --json shows the kind and the holder, and
// unlock --force stops the holder (70). So this test passes before and
// after etcdstore gains each kind.
func TestEtcdQueuedKinds(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t, 1)
	url := etcdURL(cl)
	addr := strings.TrimPrefix(url, "etcd://")
	c := newEtcdClient(t, cl)

	unsupported := func(t *testing.T, flag, name string, r result) {
		t.Helper()
		r.wantCode(t, exitUsage)
		wantStderr(t, r, flag, "is not supported by the etcd store at "+addr)
		if st := statusJSONOf(t, "--store", url, name); st.Locked {
			t.Errorf("status --json = %+v, want %s free", st, name)
		}
	}

	for _, tc := range []struct {
		name     string
		flags    []string // of the holder
		conflict []string // of a run that the holder keeps out
		err      error    // of the kind, from the library on etcdstore
		kind     string
	}{
		{"fair", []string{"--fair"}, []string{"--fair"}, c.FairMutex("probe").Err(), "fair-mutex"},
		{"shared", []string{"--shared"}, []string{"--exclusive"}, c.RWMutex("probe").Err(), "rwmutex"},
		{"exclusive", []string{"--exclusive"}, []string{"--shared"}, c.RWMutex("probe").Err(), "rwmutex"},
		{"semaphore", []string{"--semaphore", "2"}, []string{"--semaphore", "2", "--permits", "2"}, c.Semaphore("probe", 2).Err(), "semaphore"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := "kind-" + tc.name
			if errors.Is(tc.err, distlock.ErrUnsupported) {
				args := append(append([]string{"run", "--store", url}, tc.flags...), name, "--", "true")
				unsupported(t, tc.flags[0], name, run(t, args...))
				return
			}
			if tc.err != nil {
				t.Fatalf("the library refuses %s on etcd: %v", tc.name, tc.err)
			}
			checkQueuedKind(t, url, name, tc.flags, tc.conflict, tc.kind)
		})
	}

	t.Run("once-per", func(t *testing.T) {
		t.Parallel()
		_, err := c.OncePer(context.Background(), "probe-once", time.Hour, func(context.Context, uint64) error { return nil })
		dir := t.TempDir()
		first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
		r := run(t, "run", "--store", url, "--once-per", "1h", "nightly", "--", "touch", first)
		if errors.Is(err, distlock.ErrUnsupported) {
			unsupported(t, "--once-per", "nightly", r)
			return
		}
		r.wantCode(t, 0)
		run(t, "run", "--store", url, "--once-per", "1h", "nightly", "--", "touch", second).wantCode(t, 0)
		if _, err := os.Stat(first); err != nil {
			t.Errorf("the first run did not run its command: %v", err)
		}
		if _, err := os.Stat(second); err == nil {
			t.Error("the second run of the period ran its command")
		}
	})

	t.Run("permits", func(t *testing.T) {
		t.Parallel()
		err := c.Semaphore("probe-permits", 2).SetPermits(context.Background(), 3)
		r := run(t, "permits", "--store", url, "api", "3")
		if errors.Is(err, distlock.ErrUnsupported) {
			unsupported(t, "distlock permits", "api", r)
			return
		}
		r.wantCode(t, 0)
		if !strings.Contains(r.stdout, "permits of api:") || !strings.Contains(r.stdout, "3 now") {
			t.Errorf("permits printed %q", r.stdout)
		}
	})
}

// holderTokens are the tokens of the holders that st shows, of any kind.
func holderTokens(st lockState) []uint64 {
	var tokens []uint64
	if st.Holder != nil || st.Writer != nil {
		tokens = append(tokens, st.Token)
	}
	for _, r := range st.Readers {
		tokens = append(tokens, r.Token)
	}
	for _, h := range st.Holders {
		tokens = append(tokens, h.Token)
	}
	return tokens
}
