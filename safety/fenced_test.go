package safety

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The fenced store is the protected resource of the chaos run: a register
// per lock name on a separate redis-server that no fault touches. Every
// read and write carries the fencing token of the lease it was done under;
// the store refuses a token below the highest it has seen (reads count:
// once a newer holder has read the register, an older one can no longer
// write what it computed from an older read). Accepted and refused
// operations are appended to a log that the checker replays.
//
// The guarded work is a read-modify-write increment whose correctness
// needs mutual exclusion: a write states the value it read, and the store
// applies read+1 without checking it, so an increment lost to overlapping
// holders shows up in the log instead of being hidden by a compare-and-set.
var fencedScript = redis.NewScript(`
local max = redis.call('HGET', KEYS[1], 'max')
local val = tonumber(redis.call('HGET', KEYS[1], 'val') or '0')
local tok = ARGV[2]
-- Tokens are decimal integers below 2^53: compare lengths, then digits.
local stale = max and (#tok < #max or (#tok == #max and tok < max))
local entry = ARGV[1] .. ' ' .. tok .. ' ' .. ARGV[3]
if stale then
  redis.call('RPUSH', KEYS[2], entry .. ' rej ' .. val .. ' ' .. (ARGV[4] or '-'))
  return {0, val}
end
redis.call('HSET', KEYS[1], 'max', tok)
if ARGV[1] == 'w' then
  local new = tonumber(ARGV[4]) + 1
  redis.call('HSET', KEYS[1], 'val', new, 'writes', redis.call('HINCRBY', KEYS[1], 'writes', 1))
  redis.call('RPUSH', KEYS[2], entry .. ' acc ' .. val .. ' ' .. ARGV[4])
  return {1, new}
end
redis.call('RPUSH', KEYS[2], entry .. ' acc ' .. val .. ' -')
return {1, val}
`)

func registerKey(name string) string { return "reg:{" + name + "}" }
func registerLog(name string) string { return "log:{" + name + "}" }

// fencedRead reads the register of name under token; ok is false if the
// store refused the token.
func fencedRead(ctx context.Context, rdb redis.Cmdable, name string, token uint64, owner int64) (val int64, ok bool, err error) {
	res, err := fencedScript.Run(ctx, rdb, []string{registerKey(name), registerLog(name)},
		"r", strconv.FormatUint(token, 10), owner).Int64Slice()
	if err != nil {
		return 0, false, err
	}
	return res[1], res[0] == 1, nil
}

// fencedWrite stores read+1 under token.
func fencedWrite(ctx context.Context, rdb redis.Cmdable, name string, token uint64, owner, read int64) (ok bool, err error) {
	res, err := fencedScript.Run(ctx, rdb, []string{registerKey(name), registerLog(name)},
		"w", strconv.FormatUint(token, 10), owner, read).Int64Slice()
	if err != nil {
		return false, err
	}
	return res[0] == 1, nil
}

// fenceReport is what the store's log says about one register.
type fenceReport struct {
	Reads, Writes          int // accepted
	RejectedReads          int // refused: token below the highest seen
	RejectedWrites         int
	StaleAccepted          int // accepted with a token below the highest seen: must be 0
	LostUpdates            int // an accepted write computed from a value that was not current: must be 0
	WronglyRejected        int // refused although the token was not below the highest: must be 0
	FinalValue, FinalCount int64
	Err                    string
}

// checkRegister replays the log of name's register.
func checkRegister(ctx context.Context, rdb *redis.Client, name string) fenceReport {
	var r fenceReport
	entries, err := rdb.LRange(ctx, registerLog(name), 0, -1).Result()
	if err != nil {
		r.Err = err.Error()
		return r
	}
	var max uint64
	var val int64
	for _, e := range entries {
		f := strings.Fields(e)
		if len(f) != 6 {
			r.Err = fmt.Sprintf("bad log entry %q", e)
			return r
		}
		tok, _ := strconv.ParseUint(f[1], 10, 64)
		accepted := f[3] == "acc"
		switch {
		case accepted && tok < max:
			r.StaleAccepted++
		case !accepted && tok >= max:
			r.WronglyRejected++
		}
		if !accepted {
			if f[0] == "w" {
				r.RejectedWrites++
			} else {
				r.RejectedReads++
			}
			continue
		}
		max = tok
		if f[0] == "r" {
			r.Reads++
			continue
		}
		r.Writes++
		read, _ := strconv.ParseInt(f[5], 10, 64)
		if read != val {
			r.LostUpdates++
		}
		val = read + 1
	}
	h, err := rdb.HMGet(ctx, registerKey(name), "val", "writes").Result()
	if err != nil {
		r.Err = err.Error()
		return r
	}
	if s, ok := h[0].(string); ok {
		r.FinalValue, _ = strconv.ParseInt(s, 10, 64)
	}
	if s, ok := h[1].(string); ok {
		r.FinalCount, _ = strconv.ParseInt(s, 10, 64)
	}
	if r.FinalValue != val || r.FinalCount != int64(r.Writes) {
		r.Err = fmt.Sprintf("register %q: value %d and %d writes, but the log replays to %d and %d", name, r.FinalValue, r.FinalCount, val, r.Writes)
	}
	return r
}
