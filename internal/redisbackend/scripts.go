package redisbackend

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA; go-redis falls back to EVAL when the server
// answers NOSCRIPT (after a restart or SCRIPT FLUSH), which loads them again.
var (
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/abandon.lua
	abandonSrc string
	//go:embed scripts/renew.lua
	renewSrc string
	//go:embed scripts/forceunlock.lua
	forceUnlockSrc string
	//go:embed scripts/inspect.lua
	inspectSrc string

	acquireScript     = redis.NewScript(acquireSrc)
	releaseScript     = redis.NewScript(releaseSrc)
	abandonScript     = redis.NewScript(abandonSrc)
	renewScript       = redis.NewScript(renewSrc)
	forceUnlockScript = redis.NewScript(forceUnlockSrc)
	inspectScript     = redis.NewScript(inspectSrc)
)
