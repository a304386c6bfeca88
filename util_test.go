package distlock_test

import (
	"strconv"
	"strings"
	"testing"

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
