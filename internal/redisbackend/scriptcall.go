package redisbackend

import (
	"strconv"
	"time"
)

// A script call is built as the one slice of arguments of its EVALSHA
// command, as go-redis takes a command: "evalsha", the script's SHA-1, the
// number of keys, the keys, then the script's arguments. Built in place,
// it allocates once (and a Conn of go-redis sends it as it is).

// callArgs returns the start of a call of script with nkeys keys, with
// room for n more arguments (its keys, then its script arguments) to be
// appended.
func callArgs(script *Script, nkeys, n int) []any {
	args := make([]any, 3, 3+n)
	args[0], args[1], args[2] = "evalsha", script.hashArg, nkeys
	return args
}

// scriptArgs returns the arguments of a call of script on keys and argv.
func scriptArgs(script *Script, keys []string, argv ...any) []any {
	args := callArgs(script, len(keys), len(keys)+len(argv))
	for _, k := range keys {
		args = append(args, k)
	}
	return append(args, argv...)
}

// firstKey is the first key of a call.
func firstKey(args []any) string {
	k, _ := args[3].(string)
	return k
}

// holderInfo is the script argument that says who takes a lock: 'pid
// since host', since being the wall clock in ms, for inspection. The last
// one is kept boxed for the rest of its millisecond.
func (b *Backend) holderInfo() any {
	now := time.Now().UnixMilli()
	if i := b.lastInfo.Load(); i != nil && i.ms == now {
		return i.arg
	}
	var buf [128]byte
	info := append(append(buf[:0], b.pid...), ' ')
	info = append(strconv.AppendInt(info, now, 10), ' ')
	i := &boxedInfo{ms: now, arg: string(append(info, b.cfg.Host...))}
	b.lastInfo.Store(i)
	return i.arg
}

type boxedInfo struct {
	ms  int64
	arg any
}

// millis returns d in ms as a script argument. The last few durations
// asked for are kept boxed: most clients use one lease and one queue
// timeout for every lock.
func (b *Backend) millis(d time.Duration) any {
	last := b.boxedMillis.Load()
	if last != nil {
		for _, m := range *last {
			if m.d == d {
				return m.arg
			}
		}
	}
	kept := []boxedMillis{{d: d, arg: d.Milliseconds()}}
	if last != nil {
		kept = append(kept, (*last)[:min(len(*last), keptMillis-1)]...)
	}
	b.boxedMillis.Store(&kept)
	return kept[0].arg
}

// keptMillis is how many durations millis keeps boxed.
const keptMillis = 4

type boxedMillis struct {
	d   time.Duration
	arg any
}

// flag is a boolean script argument.
func flag(b bool) any { // constants: boxed without allocating
	if b {
		return "1"
	}
	return "0"
}
