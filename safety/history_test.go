package safety

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// A record is one line of a chaos client's history file. Times are
// CLOCK_MONOTONIC nanoseconds unless named Wall (CLOCK_REALTIME).
type record struct {
	K string `json:"k"` // kind: start, acq, rel, reli (a re-entered lease), ext, cancel, lost, op, close, enq, abs, abf, abok (clean-ups sent, failed, confirmed), rpcerr and wcomp (etcd), serr, once, job, stats, done

	Client int    `json:"c,omitempty"` // client id
	PID    int    `json:"pid,omitempty"`
	Owner  int64  `json:"o,omitempty"` // unique per acquisition attempt across the run
	Name   string `json:"n,omitempty"`
	Try    bool   `json:"try,omitempty"` // TryLock rather than Lock
	Token  uint64 `json:"tok,omitempty"`
	Call   int64  `json:"call,omitempty"`
	Ret    int64  `json:"ret,omitempty"`
	T      int64  `json:"t,omitempty"`
	Wall   int64  `json:"wall,omitempty"` // acq: when it returned
	Res    string `json:"res,omitempty"`  // outcome class, see classify
	Err    string `json:"err,omitempty"`
	Op     string `json:"op,omitempty"`     // fenced op: r or w
	Acc    bool   `json:"acc,omitempty"`    // fenced op accepted
	Cancel bool   `json:"cancel,omitempty"` // the acquisition's context was meant to be cancelled mid-way
	TTLms  int64  `json:"ttl,omitempty"`    // Extend: the new lease in ms
	Pair   string `json:"pair,omitempty"`   // rel: the re-entered lease's Unlock outcome, when it differs in success
	// LostCause: rel, reli: the lease's context ended with ErrLockLost
	LostCause bool   `json:"lostCause,omitempty"`
	Fair      bool   `json:"fair,omitempty"` // acq: a FairMutex
	Mode      string `json:"mode,omitempty"` // acq: an RWMutex's side, r (RLock, TryRLock) or w (Lock, TryLock)
	N         int    `json:"perm,omitempty"` // acq: a Semaphore's permits asked for
	// acq: a member of a MultiMutex (the etcd mode), and Group the owner
	// number of its first member, which the acquisition's context carries
	Multi bool  `json:"multi,omitempty"`
	Group int64 `json:"grp,omitempty"`
	// enq: an acquisition call of a queued kind (see recordEnqueue):
	// the place's placeID, the wall-clock time of the call (Wall is its
	// reply's), the script, and whether it was a re-entry
	Place    string `json:"place,omitempty"`
	CallWall int64  `json:"callWall,omitempty"`
	Script   string `json:"script,omitempty"` // enq, serr: the script called
	Reenter  bool   `json:"reenter,omitempty"`
	// once, job: a call of Once or OncePer, and a run of its job (see
	// runOnce): the job's behaviour; the call's Run (its State, Period,
	// and Err as text); T is when the job's lease context ended, if it
	// did before the job returned
	Job    string `json:"job,omitempty"`
	State  string `json:"state,omitempty"`
	Period uint64 `json:"period,omitempty"`
	RunErr string `json:"runErr,omitempty"`
	// close: the queued kinds whose holder held, and those whose waiter
	// was seen waiting (or, Inflight, whose call that may queue was
	// sent), when Close was called (see queueBeforeClose)
	Held     []string `json:"held,omitempty"`
	Kinds    []string `json:"kinds,omitempty"`
	Inflight bool     `json:"inflight,omitempty"`

	// stats and done
	Renewed     int64  `json:"renewed,omitempty"`
	RenewFailed int64  `json:"renewFailed,omitempty"`
	Lost        int64  `json:"lostN,omitempty"`
	Leaks       int    `json:"leaks,omitempty"`
	LeakText    string `json:"leakText,omitempty"`
	LogLines    int    `json:"logLines,omitempty"`
}

// historyWriter appends records to a file, one write per record, so that a
// SIGKILL loses nothing that was recorded before it.
type historyWriter struct {
	mu sync.Mutex
	f  *os.File
}

func newHistoryWriter(path string) (*historyWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &historyWriter{f: f}, nil
}

func (w *historyWriter) write(r record) {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(b); err != nil {
		fmt.Fprintln(os.Stderr, "history:", err)
	}
}

func (w *historyWriter) close() error { return w.f.Close() }

// readHistory reads a history file. A last line cut short by a SIGKILL is
// ignored.
func readHistory(path string) ([]record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			continue
		}
		out = append(out, r)
	}
	return out, sc.Err()
}
