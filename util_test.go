package distlock_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/distlock/distlock/redisstore"
	"github.com/redis/go-redis/v9"
)

func itoa(i int) string { return strconv.Itoa(i) }

// scriptCalls counts EVALSHA and EVAL calls since the last CONFIG RESETSTAT.
func scriptCalls(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	stats := commandCalls(t, rdb)
	return stats["evalsha"] + stats["eval"]
}

// commandCalls reads INFO commandstats: calls per command.
func commandCalls(t *testing.T, rdb *redis.Client) map[string]int {
	t.Helper()
	info, err := rdb.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out
}

// onlyExpiringKeys fails t if Redis holds any key of distlock's but
// fencing counters, semaphore capacities and abandonment marks, all of
// which expire by themselves: nothing else may outlive its holders and
// waiters.
func onlyExpiringKeys(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx := t.Context()
	for _, key := range rdb.Keys(ctx, redisstore.DefaultPrefix+"*").Val() {
		if strings.HasSuffix(key, "}:fence") || strings.HasSuffix(key, "}:cap") || strings.Contains(key, "}:abandoned:") {
			if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 {
				t.Errorf("key %s has no TTL (%v)", key, ttl)
			}
			continue
		}
		t.Errorf("key left behind: %s (%v)", key, rdb.Type(ctx, key).Val())
	}
}
