//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
)

// awaitHolderWatch waits until the distlock process p listens for the
// force-unlocks of its locks: it starts to once it holds one, in the
// background.
func awaitHolderWatch(t *testing.T, srv *redistest.Server, p *proc) {
	t.Helper()
	host, _ := os.Hostname()
	channel := redisstore.DefaultPrefix + "holder:" + host + ":" + strconv.Itoa(p.cmd.Process.Pid)
	rdb := srv.Client(t)
	eventually(t, "distlock to listen for force-unlocks", func() bool {
		return rdb.PubSubNumSub(t.Context(), channel).Val()[channel] >= 1
	})
}

// distlock unlock --force (a revocation), and unlock --force --now (a
// force-unlock), stop the holder's command at once: with a one-minute
// lease the holder's first renewal is 10 s away, and the loss it reports
// is the notice's. Unlock --force returns once the holder has released
// the lock, long before the lease could end; --now does not wait for it.
func TestRunForceUnlockStopsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"revoke", []string{"--force"}},
		{"now", []string{"--force", "--now"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			ready := filepath.Join(t.TempDir(), "ready")
			holder := start(t, []string{"READY=" + ready}, "run", "--redis", srv.URL(), "--ttl", "60s", "forced", "--",
				"sh", "-c", `touch "$READY"; while :; do sleep 0.05; done`)
			awaitFile(t, ready)
			awaitHolderWatch(t, srv, holder)
			args := append([]string{"unlock", "--redis", srv.URL()}, tc.flags...)
			run(t, append(args, "forced")...).wantCode(t, 0)
			if code := holder.wait(); code != exitLockLost {
				t.Fatalf("holder: exit %d, want %d; stderr %q", code, exitLockLost, holder.errOut())
			}
			if !strings.Contains(holder.errOut(), "revoked") {
				t.Errorf("stderr %q does not say the lock was revoked", holder.errOut())
			}
		})
	}
}
