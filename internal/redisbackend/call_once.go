package redisbackend

// The calls of the scripts of jobs that run once. Each builder lists its
// script's keys and arguments in the order of the script's header.

// onceCheckCall is a call of scripts/once_check.lua.
type onceCheckCall struct {
	Done   string // KEYS[1]: the job's record
	Period int64  // ARGV[1]: in ms, 0 for once per key
}

func (c onceCheckCall) args() []any {
	return scriptArgs(onceCheckScript, []string{c.Done}, c.Period)
}

// onceDoneCall is a call of scripts/once_done.lua.
type onceDoneCall struct {
	L      string // KEYS[1]: the job's lock hash
	Done   string // KEYS[2]: the job's record
	Token  string // ARGV[1]: the runner's
	Record string // ARGV[2]: see encodeRecord
	Keep   int64  // ARGV[3]: how long the record lasts, in ms
}

func (c onceDoneCall) args() []any {
	return scriptArgs(onceDoneScript, []string{c.L, c.Done}, c.Token, c.Record, c.Keep)
}
