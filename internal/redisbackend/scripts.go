package redisbackend

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The scripts run with EVALSHA; the Conn falls back to EVAL when the server
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

// A Script is one of the backend's Lua scripts, as it is sent: its text,
// libraries included, and the SHA-1 of that text, by which EVALSHA names
// it.
type Script struct {
	name string // see ScriptCall
	text string
	hash string
	// hashArg is hash as a command argument, boxed once (callArgs).
	hashArg any
}

// Text returns the script's text, for EVAL and SCRIPT LOAD.
func (s *Script) Text() string { return s.text }

// Hash returns the SHA-1 of the script's text, in hex, for EVALSHA.
func (s *Script) Hash() string { return s.hash }

// scripts holds every script; byHash maps the SHA-1 of each to it.
var (
	scripts []*Script
	byHash  = map[string]*Script{}
)

// load returns the script of file, preceded by libs in order.
func load(file string, libs ...string) *Script {
	var src strings.Builder
	for _, lib := range libs {
		src.WriteString(source(lib))
	}
	src.WriteString(source(file))
	sum := sha1.Sum([]byte(src.String()))
	s := &Script{name: strings.TrimSuffix(file, ".lua"), text: src.String(), hash: hex.EncodeToString(sum[:])}
	if file == "release_plain.lua" {
		s.name = "release" // the same step as release.lua, for a plain mutex
	}
	s.hashArg = s.hash
	scripts = append(scripts, s)
	byHash[s.hash] = s
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
// backend's scripts, as the Conn sends it (EVALSHA or EVAL): the script's
// name (its file name without .lua: "acquire", "release", ...; a plain
// mutex's release_plain.lua is "release" too, the same step), its keys and
// its arguments. ok is false for any other command. It is for tests
// and tools that watch or intercept the traffic.
func ScriptCall(args []any) (name string, keys, argv []string, ok bool) {
	if len(args) < 3 {
		return "", nil, nil, false
	}
	var s *Script
	switch strings.ToLower(fmt.Sprint(args[0])) {
	case "evalsha":
		s = byHash[fmt.Sprint(args[1])]
	case "eval":
		sum := sha1.Sum([]byte(fmt.Sprint(args[1])))
		s = byHash[hex.EncodeToString(sum[:])]
	}
	if s != nil {
		name = s.name
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

// Scripts returns every script of the backend, for a Conn that loads
// them ahead of their first call (LoadScripts).
func Scripts() []*Script { return slices.Clone(scripts) }
