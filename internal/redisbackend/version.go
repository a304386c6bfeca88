package redisbackend

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/distlock/distlock/store"
)

// MinVersion is the oldest Redis the scripts are written for (Redis 6.2:
// effects replication of scripts by default, HSET with many fields,
// SCAN with TYPE). The test suite runs on Redis 7.0.
var MinVersion = [2]int{6, 2}

// checkServer refuses servers older than MinVersion, once per Backend. A
// user whose ACL forbids INFO is trusted to run a recent server.
//
// Its errors wrap store.ErrUnsent: the request it was to precede is not
// sent.
func (b *Backend) checkServer(ctx context.Context) error {
	if b.checked.Load() {
		return nil
	}
	b.checkMu.Lock()
	defer b.checkMu.Unlock()
	if b.checked.Load() {
		return nil
	}
	info, err := b.conn.Info(ctx)
	if err != nil {
		if isReply(b.conn, err, "NOPERM") {
			b.checked.Store(true)
			return nil
		}
		return notSent(b.backendErr(ctx, err))
	}
	v := serverVersion(info)
	if v == "" {
		b.checked.Store(true)
		return nil
	}
	if !atLeast(v, MinVersion) {
		return notSent(fmt.Errorf("%w: Redis %s is older than %d.%d", store.ErrUnsupported, v, MinVersion[0], MinVersion[1]))
	}
	b.checked.Store(true)
	return nil
}

// serverVersion finds redis_version in an INFO reply; for a cluster client
// the reply of the first node will do.
func serverVersion(info string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return ""
}

func atLeast(version string, min [2]int) bool {
	parts := strings.SplitN(version, ".", 3)
	var v [2]int
	for i := 0; i < 2 && i < len(parts); i++ {
		v[i], _ = strconv.Atoi(parts[i])
	}
	return v[0] > min[0] || v[0] == min[0] && v[1] >= min[1]
}
