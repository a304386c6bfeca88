package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

var demoCommand = &command{
	name:     "demo",
	synopsis: "[flags]",
	summary:  "show, with worker processes selling stock, what the lock prevents",
	doc: `Demo starts --workers worker processes that sell --stock items kept in
Redis. Each sale is a read-modify-write that is not atomic: read the
stock, pause (--pause), write the stock minus one and record the sale.
Under the lock no two sales overlap, and exactly the stock is sold. With
--unsafe the workers do not lock: two workers that read the same stock
both sell, and more is sold than there was (how much more depends on the
timing: it is likely, not certain).

Under the lock each sale writes with the lock's fencing token, and the
shop refuses a token lower than the highest it has seen. Demo then shows
why: a client whose lease ran out while it stalled (as in a long GC
pause) comes back after another took the lock and wrote, and its stale
write is refused.

Without --store, --redis, $DISTLOCK_STORE or $REDIS_URL, demo starts a
throwaway redis-server on a free port (redis-server must be installed) and
stops it at the end; the demo needs Redis, not etcd or SQL. With a Redis URL, it
uses the keys of its shop, "distlock-demo:{RUN}:...", and those of
its lock "demo-RUN" (RUN is random): PREFIX{demo-RUN} and the keys that
start with it, its fencing counter and abandonment marks included. It
deletes them all at the end.

Demo exits with status 0 when it has shown what it shows: zero oversell
under the lock (anything else is a bug, status 1), any oversell without.
`,
	examples: `  distlock demo
  distlock demo --unsafe
  distlock demo --workers 16 --stock 500 --redis redis://127.0.0.1:6379
`,
	setup: func(fs *flag.FlagSet) func(commandLine) error {
		rf := addStoreFlags(fs)
		var d demo
		fs.IntVar(&d.workers, "workers", 8, "start `NUMBER` worker processes")
		fs.IntVar(&d.stock, "stock", 100, "sell a stock of `NUMBER` items")
		fs.DurationVar(&d.pause, "pause", 2*time.Millisecond, "pause `DURATION` between reading the stock and writing it")
		fs.BoolVar(&d.unsafe, "unsafe", false, "sell without the lock, to see the oversell")
		return func(line commandLine) error {
			switch {
			case len(line.args) != 0:
				return usageErrorf("unexpected argument %q (see distlock demo --help)", line.args[0])
			case d.workers < 1 || d.workers > 256:
				return usageErrorf("invalid value for --workers: want 1 to 256")
			case d.stock < 1 || d.stock > 1_000_000:
				return usageErrorf("invalid value for --stock: want 1 to 1000000")
			case d.pause < 0:
				return usageErrorf("invalid value for --pause: negative duration")
			}
			return d.run(rf)
		}
	},
}

// A demo is one run of the demo.
type demo struct {
	workers, stock int
	pause          time.Duration
	unsafe         bool
}

func (d *demo) run(rf *storeFlags) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), interruptSignals...)
	defer stop()

	if len(rf.masters) > 0 {
		return usageErrorf("the demo runs on one Redis (--redis), not on Redlock masters (--redlock)")
	}
	u, err := rf.resolvedURL()
	if err != nil {
		return err
	}
	if (u.isEtcd() || u.isSQL()) && !u.redisOnly {
		return usageErrorf("the demo keeps its shop in Redis: give a redis:// URL, not the %s:// URL in %s", u.scheme(), u.from)
	}
	where := "Redis at "
	if !u.given {
		srv, err := redistest.NewServer()
		if err != nil {
			return exitf(exitUnavailable, "cannot start a throwaway Redis (or pass --redis URL): %v", err)
		}
		defer srv.Stop()
		rf.url, where = srv.URL(), "throwaway redis-server at "
	}
	s, err := newSession(rf)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.ready(ctx, nil); err != nil {
		return err
	}

	run := randomID()
	lock := "demo-" + run
	shop := newShop(s.rdb, run)
	if err := shop.open(ctx, d.stock); err != nil {
		return s.failure(err)
	}
	defer func() {
		ctx := context.WithoutCancel(ctx)
		if cerr := errors.Join(shop.close(ctx), deleteLockKeys(ctx, s, lock)); cerr != nil && err == nil {
			err = exitf(exitFailure, "could not delete the demo's keys: %v", rootCause(cerr))
		}
	}()

	mode := fmt.Sprintf("under the lock %q, writes fenced by its token", lock)
	if d.unsafe {
		mode = "WITHOUT a lock (--unsafe)"
	}
	fmt.Printf("%d worker processes sell %d items, %s, on %s%s.\n", d.workers, d.stock, mode, where, s.addr)
	fmt.Printf("Each sale reads the stock, pauses %v, then writes the stock minus one.\n", d.pause)

	start := time.Now()
	if err := d.runWorkers(ctx, rf, shop, run, lock); err != nil {
		if ctx.Err() != nil {
			return exitf(exitSignal+2, "interrupted")
		}
		return err
	}
	took := time.Since(start)

	sold, per, left, err := shop.report(ctx, d.workers)
	if err != nil {
		return s.failure(err)
	}
	fmt.Printf("Sales per worker: %s; stock left %d; %v.\n", joinInts(per), left, took.Round(time.Millisecond))
	over := sold - d.stock
	switch {
	case d.unsafe && over > 0:
		fmt.Printf("no lock: sold %d of %d, OVERSOLD %d\n", sold, d.stock, over)
		return nil
	case d.unsafe:
		fmt.Printf("no lock: sold %d of %d, oversold %d (lucky timing: try more --workers or a longer --pause)\n", sold, d.stock, over)
		return nil
	case over != 0 || left != 0:
		return exitf(exitFailure, "BUG: under the lock: sold %d of %d, oversold %d, stock left %d", sold, d.stock, over, left)
	}
	fmt.Printf("distlock: sold %d of %d, oversold 0\n", sold, d.stock)
	return fencingScene(ctx, s, shop, lock)
}

// runWorkers starts the worker processes, lines them up, lets them go and
// waits for them all.
func (d *demo) runWorkers(ctx context.Context, rf *storeFlags, shop *shop, run, lock string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find the distlock executable to start workers: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan error, d.workers)
	for i := 1; i <= d.workers; i++ {
		args := []string{"demo-worker", "--prefix", rf.prefix, "--run", run, "--lock", lock,
			"--id", strconv.Itoa(i), "--pause", d.pause.String()}
		if d.unsafe {
			args = append(args, "--unsafe")
		}
		for flag, file := range map[string]string{"--tls-ca": rf.tls.ca, "--tls-cert": rf.tls.cert, "--tls-key": rf.tls.key} {
			if file != "" {
				args = append(args, flag, file)
			}
		}
		cmd := exec.Command(exe, args...)
		u, _ := rf.resolvedURL() // checked by run
		// The URL goes in $REDIS_URL, where a password does not show, and
		// $DISTLOCK_STORE, which would win over it, goes.
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, storeEnv+"=")
		}), "REDIS_URL="+u.url)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.SysProcAttr = workerProcAttr()
		if err := cmd.Start(); err != nil {
			cancel()
			results <- fmt.Errorf("cannot start worker %d: %w", i, err)
			continue
		}
		go func() {
			err := waitWorker(ctx, cmd)
			if err != nil {
				cancel() // the others would wait for it at the starting line
				err = fmt.Errorf("worker %d: %w", i, err)
			}
			results <- err
		}()
	}
	serr := shop.startWorkers(ctx, d.workers)
	if serr != nil {
		cancel() // stop the workers at the starting line
	}
	var first error // the first worker to fail; the others were then killed
	for range d.workers {
		if werr := <-results; werr != nil && first == nil {
			first = werr
		}
	}
	if first != nil {
		return first
	}
	return serr
}

// waitWorker waits for the worker process cmd, killing it if ctx ends.
func waitWorker(ctx context.Context, cmd *exec.Cmd) error {
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Kill()
		case <-done:
		}
	}()
	return cmd.Wait()
}

// deleteLockKeys deletes every key of the lock name of the session s: the
// lock's own, PREFIX{name}, and those that start with it (its fencing
// counter, its queue and holders, the abandonment marks of its owners,
// one per owner). The demo's lock has a name of its own, which nobody
// takes again, so its fencing counter may go. The keys share the lock's
// hash slot: on a Cluster, they are all on the master of that slot.
func deleteLockKeys(ctx context.Context, s *session, name string) error {
	lock := s.prefix + "{" + name + "}"
	node := s.rdb
	if cluster, ok := s.rdb.(*redis.ClusterClient); ok {
		master, err := cluster.MasterForKey(ctx, lock)
		if err != nil {
			return err
		}
		node = master
	}
	var keys []string
	iter := node.Scan(ctx, 0, globEscape(lock)+"*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil || len(keys) == 0 {
		return err
	}
	return node.Del(ctx, keys...).Err()
}

// globEscape escapes the characters of s that a Redis glob pattern (SCAN
// MATCH, KEYS) reads as special: * ? [ ] and \.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, " ")
}
