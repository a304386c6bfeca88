package sqlstore

import (
	"encoding/json"
	"time"

	"github.com/distlock/distlock/store"
)

// A notice is what a step tells other processes when its transaction
// commits: on PostgreSQL a NOTIFY on the store's channel (the table's
// name), JSON-encoded; elsewhere only this store's own watchers hear it,
// and other processes find the change by polling.
type notice struct {
	Type noticeType `json:"t"`
	Name string     `json:"n"`
	// Store is the id of the store that released a plain mutex: it
	// ignores its own releases (its Client hands them over directly).
	Store string `json:"s,omitempty"`
	// A grant: the grantee's GranteeID, its token, the Seq of its last
	// request applied before it, and the lease that bounds its expiry.
	Grantee string        `json:"g,omitempty"`
	Token   uint64        `json:"k,omitempty"`
	Seq     uint64        `json:"q,omitempty"`
	Lease   time.Duration `json:"l,omitempty"`
	// A leader (Term > 0) or the end of one (Ended).
	Term  uint64 `json:"term,omitempty"`
	Ended uint64 `json:"ended,omitempty"`
	Value string `json:"value,omitempty"`
	ID    string `json:"id,omitempty"`
	Host  string `json:"host,omitempty"`
	PID   int    `json:"pid,omitempty"`
	Since int64  `json:"since,omitempty"`
}

type noticeType string

const (
	noticeRelease noticeType = "r" // a plain mutex was freed
	noticeGrant   noticeType = "g" // a queued kind was granted to a waiter
	noticeRevoked noticeType = "x" // a holder was force-unlocked or revoked
	noticeLeader  noticeType = "l" // an election's leader changed
)

func (n notice) encode() string {
	b, _ := json.Marshal(n)
	return string(b)
}

func decodeNotice(s string) (notice, bool) {
	var n notice
	if json.Unmarshal([]byte(s), &n) != nil || n.Name == "" {
		return notice{}, false
	}
	return n, true
}

func (n notice) grant() store.Notice {
	return store.Notice{Grantee: n.Grantee, Token: n.Token, Seq: n.Seq, Lease: n.Lease}
}

func (n notice) announcement() store.Announcement {
	if n.Term == 0 {
		return store.Announcement{Ended: n.Ended}
	}
	return store.Announcement{Term: n.Term, Value: n.Value, ID: n.ID, Host: n.Host, PID: n.PID,
		Since: time.UnixMilli(n.Since)}
}
