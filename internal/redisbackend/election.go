package redisbackend

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
)

// An Announcement is what an election's channel says: a new leader, or,
// with Term 0, that nobody leads.
type Announcement struct {
	Term uint64
	// Ended is, when nobody leads, the term that ended; 0 when it is not
	// known: the fencing counter had expired, or the announcement was
	// made by an older version's script, which sends none.
	Ended uint64
	Value string
	ID    string // the leader's owner id, as OwnerID shows it
	Host  string
	PID   int
	Since time.Time
}

// WatchLeader delivers the announcements of the named election to fn,
// in the order the scripts made them, until the returned stop is called;
// fn gets lost set (and a zero Announcement) when some may have been lost
// (a reconnection). It returns once they are flowing. fn must not block.
func (b *Backend) WatchLeader(ctx context.Context, name string, fn func(a Announcement, lost bool)) (func(), error) {
	return b.notify.watch(ctx, b.cfg.Keys.Leader(name), func(payload string, lost bool) {
		if lost {
			fn(Announcement{}, true)
			return
		}
		fn(parseAnnouncement(payload), false)
	})
}

// parseAnnouncement reads queue.lua's announce: a JSON object of strings
// {term, value, id, host, pid, since} for a new leader, {ended} when
// nobody leads, or {} when nobody leads and the term that ended is not
// known (older versions always send that).
func parseAnnouncement(payload string) Announcement {
	var m struct {
		Term, Ended, Value, ID, Host, PID, Since string
	}
	if json.Unmarshal([]byte(payload), &m) != nil {
		return Announcement{}
	}
	term, _ := strconv.ParseUint(m.Term, 10, 64)
	ended, _ := strconv.ParseUint(m.Ended, 10, 64)
	pid, _ := strconv.Atoi(m.PID)
	since, _ := strconv.ParseInt(m.Since, 10, 64)
	return Announcement{Term: term, Ended: ended, Value: m.Value, ID: m.ID, Host: m.Host, PID: pid, Since: time.UnixMilli(since)}
}

// OwnerID is how an owner id is shown (inspection, announcements): the
// first 16 hex digits of its SHA-1, so that showing it does not let anyone
// release the lock. queue.lua's announce computes the same.
func OwnerID(owner string) string {
	sum := sha1.Sum([]byte(owner))
	return hex.EncodeToString(sum[:8])
}
