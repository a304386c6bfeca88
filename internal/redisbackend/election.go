package redisbackend

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/distlock/distlock/store"
)

// WatchLeader delivers the announcements of the named election to fn,
// in the order the scripts made them, until the returned stop is called;
// fn gets lost set (and a zero store.Announcement) when some may have been lost
// (a reconnection). It returns once they are flowing. fn must not block.
func (b *Backend) WatchLeader(ctx context.Context, name string, fn func(a store.Announcement, lost bool)) (func(), error) {
	return b.notify.watch(ctx, b.cfg.Keys.Leader(name), func(payload string, lost bool) {
		if lost {
			fn(store.Announcement{}, true)
			return
		}
		fn(parseAnnouncement(payload), false)
	})
}

// parseAnnouncement reads queue.lua's announce: a JSON object of strings
// {term, value, id, host, pid, since} for a new leader, {ended} when
// nobody leads, or {} when nobody leads and the term that ended is not
// known (older versions always send that).
func parseAnnouncement(payload string) store.Announcement {
	var m struct {
		Term, Ended, Value, ID, Host, PID, Since string
	}
	if json.Unmarshal([]byte(payload), &m) != nil {
		return store.Announcement{}
	}
	term, _ := strconv.ParseUint(m.Term, 10, 64)
	ended, _ := strconv.ParseUint(m.Ended, 10, 64)
	pid, _ := strconv.Atoi(m.PID)
	since, _ := strconv.ParseInt(m.Since, 10, 64)
	return store.Announcement{Term: term, Ended: ended, Value: m.Value, ID: m.ID, Host: m.Host, PID: pid, Since: time.UnixMilli(since)}
}
