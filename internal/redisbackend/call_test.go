package redisbackend

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Every builder makes as many keys and arguments as its script's header
// lists.
func TestCallsMatchHeaders(t *testing.T) {
	for file, args := range map[string][]any{
		"acquire.lua":        acquireCall{}.args(),
		"quorum_acquire.lua": quorumAcquireCall{}.args(),
		"fair_acquire.lua":   fairAcquireCall{}.args(),
		"rw_acquire.lua":     rwAcquireCall{}.args(),
		"sem_acquire.lua":    semAcquireCall{}.args(),
		"sem_permits.lua":    semPermitsCall{}.args(),
		"release_plain.lua":  releasePlainCall{}.args(),
		"release.lua":        releaseCall{}.args(),
		"abandon.lua":        abandonCall{}.args(),
		"once_check.lua":     onceCheckCall{}.args(),
		"once_done.lua":      onceDoneCall{}.args(),
		"inspect.lua":        inspectCall{}.args(),
		"forceunlock.lua":    forceUnlockCall{}.args(),
		"revoke.lua":         revokeCall{}.args(),
	} {
		keys, argv := headerCounts(file)
		if args[0] != "evalsha" || args[2] != keys || len(args) != 3+keys+argv {
			t.Errorf("%s: %d keys and %d arguments in its header; the call is %v", file, keys, argv, args)
		}
	}
	// Two members: KEYS[8i-7..8i] and ARGV[3+i] each, after ARGV[1..3].
	if _, argv := headerCounts("multi_acquire.lua"); argv != 3 {
		t.Errorf("multi_acquire.lua: %d arguments before the owners in its header", argv)
	}
	if args := (multiAcquireCall{Members: make([]multiMember, 2)}).args(); args[2] != 16 || len(args) != 3+16+3+2 {
		t.Errorf("multi_acquire.lua: the call of two members is %v", args)
	}
}

// headerCounts returns the highest KEYS and ARGV indexes in the header of
// a script.
func headerCounts(file string) (keys, argv int) {
	index := regexp.MustCompile(`(KEYS|ARGV)\[(?:\d+\.\.)?(\d+)\]`)
	for _, line := range strings.Split(source(file), "\n") {
		if !strings.HasPrefix(line, "--") {
			break
		}
		for _, m := range index.FindAllStringSubmatch(line, -1) {
			n, _ := strconv.Atoi(m[2])
			if m[1] == "KEYS" {
				keys = max(keys, n)
			} else {
				argv = max(argv, n)
			}
		}
	}
	return keys, argv
}
