//go:build linux

package sqltest

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestPostgresReplica: a synchronous replica has what the primary
// committed before it was made, refuses writes, and is named in the
// primary's synchronous_standby_names until it is stopped; a second one,
// promoted after the primary is killed, has the last commit of the
// primary, accepts writes, and takes no more WAL.
func TestPostgresReplica(t *testing.T) {
	pg := StartPostgres(t)
	conn := pgConnect(t, pg)
	c := ctx(t, 3*queryTimeout)
	if _, err := conn.Exec(c, `CREATE TABLE locks (name text PRIMARY KEY, owner text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(c, `INSERT INTO locks VALUES ('a', 'x')`); err != nil {
		t.Fatal(err)
	}

	r1 := pg.StartReplica(t, WithSynchronousReplication())
	if r1.Port() == pg.Port() || r1.Dir() == pg.Dir() || r1.PID() == 0 {
		t.Fatalf("replica: port %d, dir %s, pid %d; primary: port %d, dir %s", r1.Port(), r1.Dir(), r1.PID(), pg.Port(), pg.Dir())
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup(postgresUser)
		if err != nil {
			t.Fatal(err)
		}
		if got := processUID(t, r1.PID()); strconv.Itoa(got) != u.Uid {
			t.Errorf("running as root: the replica runs as uid %d, want %s (%s)", got, u.Uid, postgresUser)
		}
	}
	rc := pgConnect(t, r1)
	// What was committed before NewReplica is there when it returns.
	if got := pgOwners(t, rc); got != "a=x" {
		t.Errorf("replica has %q, want %q", got, "a=x")
	}
	var recovering bool
	if err := rc.QueryRow(c, `SELECT pg_is_in_recovery()`).Scan(&recovering); err != nil || !recovering {
		t.Errorf("replica: pg_is_in_recovery() = %v, %v; want true", recovering, err)
	}
	var pe *pgconn.PgError
	if _, err := rc.Exec(c, `INSERT INTO locks VALUES ('r', 'w')`); !errors.As(err, &pe) || pe.Code != "25006" {
		t.Errorf("write on the replica: %v, want SQLSTATE 25006", err)
	}
	var names, syncState string
	err := conn.QueryRow(c, `SELECT current_setting('synchronous_standby_names'),
		(SELECT string_agg(sync_state, ',') FROM pg_stat_replication)`).Scan(&names, &syncState)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(names, "sqltest_replica_") || syncState != "quorum" {
		t.Errorf("primary: synchronous_standby_names %q, replicas' sync_state %q; want the replica, quorum", names, syncState)
	}

	// Stopped, the replica is no longer waited for.
	if err := r1.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(c, `INSERT INTO locks VALUES ('b', 'y')`); err != nil {
		t.Fatalf("commit on the primary after its synchronous replica stopped: %v", err)
	}
	if err := conn.QueryRow(c, `SELECT current_setting('synchronous_standby_names')`).Scan(&names); err != nil || names != "" {
		t.Errorf("after Stop: synchronous_standby_names = %q, %v; want empty", names, err)
	}
	if err := r1.Promote(c); err == nil {
		t.Error("Promote of a stopped replica succeeded")
	}

	// The primary's last commit before it dies is on the synchronous
	// replica, and promoted, the replica takes writes.
	r2 := pg.StartReplica(t, WithSynchronousReplication())
	if _, err := conn.Exec(c, `INSERT INTO locks VALUES ('c', 'z')`); err != nil {
		t.Fatal(err)
	}
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := r2.Promote(c); err != nil {
		t.Fatalf("Promote: %v", err)
	}
	rc = pgConnect(t, r2)
	if err := rc.QueryRow(c, `SELECT pg_is_in_recovery()`).Scan(&recovering); err != nil || recovering {
		t.Errorf("promoted: pg_is_in_recovery() = %v, %v; want false", recovering, err)
	}
	if got := pgOwners(t, rc); got != "a=x,b=y,c=z" {
		t.Errorf("promoted replica has %q, want %q", got, "a=x,b=y,c=z")
	}
	if _, err := rc.Exec(c, `INSERT INTO locks VALUES ('d', 'w')`); err != nil {
		t.Errorf("write on the promoted replica: %v", err)
	}
	if err := r2.Promote(c); err != nil {
		t.Errorf("second Promote: %v", err)
	}
	// A promoted replica restarts as a primary, with its writes.
	if err := r2.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := pgOwners(t, pgConnect(t, r2)); got != "a=x,b=y,c=z,d=w" {
		t.Errorf("promoted replica, restarted, has %q", got)
	}
	// Its Stop takes it out of the (dead) primary's settings too.
	if err := r2.Stop(); err != nil {
		t.Fatal(err)
	}
	auto, err := os.ReadFile(filepath.Join(pg.Dir(), "data", "postgresql.auto.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(auto), "synchronous_standby_names") {
		t.Errorf("the primary's postgresql.auto.conf still names a synchronous replica:\n%s", auto)
	}
}

// TestPostgresReplicaRefused: the options and calls that make no replica.
func TestPostgresReplicaRefused(t *testing.T) {
	if pg, err := NewPostgres(WithSynchronousReplication()); err == nil {
		pg.Stop()
		t.Error("NewPostgres took WithSynchronousReplication")
	}
	pg := StartPostgres(t)
	if err := pg.Promote(ctx(t, queryTimeout)); err == nil || !strings.Contains(err.Error(), "not a replica") {
		t.Errorf("Promote of a primary: %v, want not a replica", err)
	}
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	if r, err := pg.NewReplica(); !errors.Is(err, ErrNotRunning) {
		if err == nil {
			r.Stop()
		}
		t.Errorf("NewReplica of a killed server: %v, want ErrNotRunning", err)
	}
}
