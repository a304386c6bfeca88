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
// Each script is its own file preceded by the libraries it needs: lib.lua
// for every lock script, and queue.lua too for those that can meet a
// queued kind. Redis runs a script's whole text at every call, defining
// each library function again, so the plain mutex's scripts go without
// queue.lua.
var (
	acquireScript       = load("acquire.lua", "lib.lua")
	multiAcquireScript  = load("multi_acquire.lua", "lib.lua")
	quorumAcquireScript = load("quorum_acquire.lua", "lib.lua")
	fairAcquireScript   = load("fair_acquire.lua", "lib.lua", "queue.lua")
	rwAcquireScript     = load("rw_acquire.lua", "lib.lua", "queue.lua")
	semAcquireScript    = load("sem_acquire.lua", "lib.lua", "queue.lua")
	semPermitsScript    = load("sem_permits.lua", "lib.lua", "queue.lua")
	releaseScript       = load("release.lua", "lib.lua", "queue.lua")
	releasePlainScript  = load("release_plain.lua", "lib.lua") // named "release" by ScriptCall
	abandonScript       = load("abandon.lua", "lib.lua", "queue.lua")
	renewScript         = load("renew.lua", "lib.lua")
	sharedRenewScript   = load("shared_renew.lua", "lib.lua", "queue.lua")
	refreshScript       = load("refresh.lua", "lib.lua", "queue.lua")
	forceUnlockScript   = load("forceunlock.lua", "lib.lua", "queue.lua")
	revokeScript        = load("revoke.lua", "lib.lua", "queue.lua")
	inspectScript       = load("inspect.lua", "lib.lua")
	onceCheckScript     = load("once_check.lua")
	onceDoneScript      = load("once_done.lua")
)

//go:embed scripts/*.lua
var sources embed.FS

// scriptNames maps the SHA-1 of each script to its name (ScriptCall).
var scriptNames = map[string]string{}

// hashes holds the SHA-1 of each script as a command argument (callArgs),
// and texts its text (eval).
var (
	hashes = map[*redis.Script]any{}
	texts  = map[*redis.Script]string{}
)

// load returns the script of file, preceded by libs in order.
func load(file string, libs ...string) *redis.Script {
	var src strings.Builder
	for _, lib := range libs {
		src.WriteString(source(lib))
	}
	src.WriteString(source(file))
	s := redis.NewScript(src.String())
	name := strings.TrimSuffix(file, ".lua")
	if file == "release_plain.lua" {
		name = "release" // the same step as release.lua, for a plain mutex
	}
	scriptNames[s.Hash()] = name
	hashes[s] = s.Hash()
	texts[s] = src.String()
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
// name (its file name without .lua: "acquire", "release", ...; a plain
// mutex's release_plain.lua is "release" too, the same step), its keys and
// its arguments. ok is false for any other command. It is for tests
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
		semPermitsScript, releaseScript, releasePlainScript, abandonScript, renewScript, sharedRenewScript, refreshScript,
		forceUnlockScript, revokeScript, inspectScript, onceCheckScript, onceDoneScript} {
		if err := s.Load(ctx, rdb).Err(); err != nil {
			return err
		}
	}
	return nil
}
