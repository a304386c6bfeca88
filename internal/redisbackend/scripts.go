package redisbackend

import (
	"context"
	"embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA; go-redis falls back to EVAL when the server
// answers NOSCRIPT (after a restart or SCRIPT FLUSH), which loads them again.
// Every script but renew.lua and the once scripts is lib.lua followed by
// its own file.
var (
	acquireScript       = load("acquire.lua")
	multiAcquireScript  = load("multi_acquire.lua")
	quorumAcquireScript = load("quorum_acquire.lua")
	fairAcquireScript   = load("fair_acquire.lua")
	rwAcquireScript     = load("rw_acquire.lua")
	semAcquireScript    = load("sem_acquire.lua")
	semPermitsScript    = load("sem_permits.lua")
	releaseScript       = load("release.lua")
	abandonScript       = load("abandon.lua")
	renewScript         = load("renew.lua")
	sharedRenewScript   = load("shared_renew.lua")
	refreshScript       = load("refresh.lua")
	forceUnlockScript   = load("forceunlock.lua")
	inspectScript       = load("inspect.lua")
	onceCheckScript     = load("once_check.lua")
	onceDoneScript      = load("once_done.lua")
)

//go:embed scripts/*.lua
var sources embed.FS

// scriptNames maps the SHA-1 of each script to its name (ScriptCall).
var scriptNames = map[string]string{}

func load(file string) *redis.Script {
	src := source(file)
	if file != "renew.lua" && file != "once_check.lua" && file != "once_done.lua" {
		src = source("lib.lua") + src
	}
	s := redis.NewScript(src)
	scriptNames[s.Hash()] = strings.TrimSuffix(file, ".lua")
	return s
}

func source(file string) string {
	b, err := sources.ReadFile("scripts/" + file)
	if err != nil {
		panic(err) // embedded: cannot happen
	}
	return string(b)
}

// ScriptCall reads the arguments of a command that runs one of the
// backend's scripts, as go-redis sends it (EVALSHA or EVAL): the script's
// name (its file name without .lua: "acquire", "release", ...), its keys
// and its arguments. ok is false for any other command. It is for tests
// and tools that watch or intercept the traffic.
func ScriptCall(args []any) (name string, keys, argv []string, ok bool) {
	if len(args) < 3 {
		return "", nil, nil, false
	}
	switch strings.ToLower(fmt.Sprint(args[0])) {
	case "evalsha":
		name = scriptNames[fmt.Sprint(args[1])]
	case "eval":
		name = scriptNames[redis.NewScript(fmt.Sprint(args[1])).Hash()]
	}
	n, err := strconv.Atoi(fmt.Sprint(args[2]))
	if name == "" || err != nil || n < 0 || 3+n > len(args) {
		return "", nil, nil, false
	}
	for _, a := range args[3 : 3+n] {
		keys = append(keys, fmt.Sprint(a))
	}
	for _, a := range args[3+n:] {
		argv = append(argv, fmt.Sprint(a))
	}
	return name, keys, argv, true
}

// LoadScripts loads every script of the backend on rdb (SCRIPT LOAD), so
// that their first EVALSHA does not fail with NOSCRIPT. The backend does
// not need it; tests that intercept EVALSHA calls do.
func LoadScripts(ctx context.Context, rdb redis.Scripter) error {
	for _, s := range []*redis.Script{acquireScript, multiAcquireScript, quorumAcquireScript, fairAcquireScript, rwAcquireScript, semAcquireScript,
		semPermitsScript, releaseScript, abandonScript, renewScript, sharedRenewScript, refreshScript,
		forceUnlockScript, inspectScript, onceCheckScript, onceDoneScript} {
		if err := s.Load(ctx, rdb).Err(); err != nil {
			return err
		}
	}
	return nil
}
