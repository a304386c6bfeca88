package redisbackend

import (
	"context"
	"strings"
)

// maxRedirects is how many MOVED or ASK redirections an acknowledged call
// follows, as go-redis's cluster client does by default.
const maxRedirects = 3

// redirection reads err, a call's error, as a Cluster redirection: MOVED
// (the slot moved: the client's slot map is out of date) or ASK (the slot
// is moving: ask the node named, after ASKING, this once), both naming
// the node at addr. ok is false for any other error.
func redirection(c Conn, err error) (addr string, ask, ok bool) {
	if err == nil || !c.IsReply(err) {
		return "", false, false
	}
	f := strings.Fields(err.Error()) // "MOVED 3999 127.0.0.1:6381"
	if len(f) != 3 || f[0] != "MOVED" && f[0] != "ASK" {
		return "", false, false
	}
	return f[2], f[0] == "ASK", true
}

// SendAcked sends calls, which all live on one master, with send("",
// calls, nil), to the master of the first call's first key; then calls
// refused with MOVED or ASK, which were not run, go again, with
// send(addr, those, asking), to the node named (after ASKING for those
// in asking), at most maxRedirects times. A MOVED has c reload its slot
// map first. send leaves the calls as they are when it does not know the
// node: the redirection stays the outcome (nothing was applied), which
// the engine counts as a failure. It is for a Conn's EvalAcked.
func SendAcked(ctx context.Context, c Conn, calls []*Call, send func(addr string, calls []*Call, asking map[*Call]bool)) {
	send("", calls, nil)
	for hop := 0; hop < maxRedirects; hop++ {
		var addrs []string
		to := map[string][]*Call{}
		asking := map[*Call]bool{}
		moved := false
		for _, call := range calls {
			addr, ask, ok := redirection(c, call.Err)
			if !ok {
				continue
			}
			moved = moved || !ask
			asking[call] = ask
			if to[addr] == nil {
				addrs = append(addrs, addr)
			}
			to[addr] = append(to[addr], call)
		}
		if len(addrs) == 0 {
			return
		}
		if moved {
			c.Reload(ctx) // the slot map is out of date
		}
		calls = calls[:0:0]
		for _, addr := range addrs {
			send(addr, to[addr], asking)
			calls = append(calls, to[addr]...)
		}
	}
}
