package redisbackend

// The calls of the scripts for operators. Each builder lists its script's
// keys and arguments in the order of the script's header.

// inspectCall is a call of scripts/inspect.lua.
type inspectCall struct {
	Keys lockKeys // KEYS[1..8]
}

func (c inspectCall) args() []any { return scriptArgs(inspectScript, c.Keys[:]) }

// forceUnlockCall is a call of scripts/forceunlock.lua.
type forceUnlockCall struct {
	Keys      lockKeys // KEYS[1..8]
	Channel   string   // ARGV[1]: the release channel
	Mode      any      // ARGV[2]: 's' to publish with SPUBLISH
	Retention any      // ARGV[3]: the fencing counter's, in ms
	Holders   string   // ARGV[4]: the prefix of the holders' process channels
	Name      string   // ARGV[5]: the lock's
}

func (c forceUnlockCall) args() []any {
	return scriptArgs(forceUnlockScript, c.Keys[:], c.Channel, c.Mode, c.Retention, c.Holders, c.Name)
}

// revokeCall is a call of scripts/revoke.lua.
type revokeCall struct {
	Keys    lockKeys // KEYS[1..8]
	Holders string   // ARGV[1]: the prefix of the holders' process channels
	Name    string   // ARGV[2]: the lock's
}

func (c revokeCall) args() []any {
	return scriptArgs(revokeScript, c.Keys[:], c.Holders, c.Name)
}
