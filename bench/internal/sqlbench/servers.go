package sqlbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/bench/internal/harness"
	"github.com/distlock/distlock/sqltest"
)

// Servers are the database servers of a run, started by package sqltest
// on free loopback ports (never the machine's own services).
type Servers struct {
	PG    *sqltest.Postgres // nil if not started
	Maria *sqltest.MariaDB  // nil if not started
}

// StartServers starts a PostgreSQL server (with pgOpts) if pg, and a
// MariaDB server if maria. With cpus, the servers (the postmaster and its
// processes, every thread of mariadbd) are pinned to them: processes and
// threads started later inherit it.
func StartServers(pg, maria bool, cpus []int, pgOpts ...sqltest.Option) (*Servers, error) {
	s := &Servers{}
	if pg {
		p, err := sqltest.NewPostgres(pgOpts...)
		if err != nil {
			return nil, err
		}
		s.PG = p
		if cpus != nil {
			if err := pinTree(p.PID(), cpus); err != nil {
				return nil, errors.Join(err, s.Stop())
			}
		}
	}
	if maria {
		m, err := sqltest.NewMariaDB()
		if err != nil {
			return nil, errors.Join(err, s.Stop())
		}
		s.Maria = m
		if cpus != nil {
			if err := harness.Pin(m.PID(), cpus); err != nil {
				return nil, errors.Join(err, s.Stop())
			}
		}
	}
	return s, nil
}

// pinTree pins pid and its children.
func pinTree(pid int, cpus []int) error {
	if err := harness.Pin(pid, cpus); err != nil {
		return err
	}
	kids, err := children(pid)
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := harness.Pin(k, cpus); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// DSNs are the servers' DSNs ("" for a server not started).
func (s *Servers) DSNs() DSNs {
	var d DSNs
	if s.PG != nil {
		d.Postgres = s.PG.DSN()
	}
	if s.Maria != nil {
		d.MariaDB = s.Maria.DSN()
	}
	return d
}

// CPU is the CPU time (user + system) the server of lib (Server(lib))
// has used so far: for PostgreSQL, the postmaster's, that of its children
// that have exited (its cutime and cstime) and that of its live children
// (backends and auxiliary processes); for MariaDB, mariadbd's (all its
// threads). It moves in ticks of 10 ms.
func (s *Servers) CPU(lib string) time.Duration {
	pid := 0
	switch {
	case Server(lib) == "mariadb" && s.Maria != nil:
		pid = s.Maria.PID()
	case Server(lib) == "postgres" && s.PG != nil:
		pid = s.PG.PID()
	}
	if pid == 0 {
		return 0
	}
	d, _ := TreeCPU(pid)
	return d
}

// Stop stops the servers.
func (s *Servers) Stop() error {
	var errs []error
	if s.PG != nil {
		errs = append(errs, s.PG.Stop())
	}
	if s.Maria != nil {
		errs = append(errs, s.Maria.Stop())
	}
	return errors.Join(errs...)
}

// The process tree's CPU from /proc. Package sqltest reads
// /proc/PID/stat and a server's children too (procfs_linux.go, to pause
// and kill PostgreSQL's backends), but exports nothing of it and reads the
// state and start time, not the CPU: hence this reader of its own.

const tick = 10 * time.Millisecond // USER_HZ 100

// stat is what /proc/PID/stat says of a process's CPU.
type stat struct {
	ppid                         int
	utime, stime, cutime, cstime int64 // ticks
}

func readStat(pid int) (stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	// "PID (COMM) STATE PPID ...": the fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state): field n is f[n-3]; ppid 4, utime 14,
	// stime 15, cutime 16, cstime 17.
	if len(f) < 15 {
		return stat{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	var st stat
	var errs [5]error
	st.ppid, errs[0] = strconv.Atoi(string(f[1]))
	st.utime, errs[1] = strconv.ParseInt(string(f[11]), 10, 64)
	st.stime, errs[2] = strconv.ParseInt(string(f[12]), 10, 64)
	st.cutime, errs[3] = strconv.ParseInt(string(f[13]), 10, 64)
	st.cstime, errs[4] = strconv.ParseInt(string(f[14]), 10, 64)
	return st, errors.Join(errs[:]...)
}

// children are the pids whose parent is pid.
func children(pid int) ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var kids []int
	for _, name := range names {
		n, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if st, err := readStat(n); err == nil && st.ppid == pid {
			kids = append(kids, n)
		}
	}
	return kids, nil
}

// TreeCPU is the CPU time of process pid (all its threads), of its
// children that it has waited for (cutime, cstime), and of its live
// children: the postmaster reaps its backends, so a backend that exits
// moves from the last term to the second. The children are read first,
// so that one exiting in between is counted twice rather than not at all
// (at most its last tick).
func TreeCPU(pid int) (time.Duration, error) {
	kids, err := children(pid)
	if err != nil {
		return 0, err
	}
	var t int64
	for _, k := range kids {
		if st, err := readStat(k); err == nil && st.ppid == pid {
			t += st.utime + st.stime + st.cutime + st.cstime
		}
	}
	st, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	t += st.utime + st.stime + st.cutime + st.cstime
	return time.Duration(t) * tick, nil
}

// Versions are the servers' versions ("PostgreSQL 15.x", "MariaDB
// 10.11.x"), those that could be read.
func (s *Servers) Versions() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var vs []string
	if s.PG != nil {
		if db, err := pgDB(ctx, s.PG.DSN(), 1); err == nil {
			var v string
			if db.QueryRowContext(ctx, `SHOW server_version`).Scan(&v) == nil && v != "" {
				vs = append(vs, "PostgreSQL "+strings.Fields(v)[0])
			}
			_ = db.Close()
		}
	}
	if s.Maria != nil {
		if db, err := myDB(ctx, s.Maria.DSN(), 1); err == nil {
			var v string
			if db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&v) == nil {
				vs = append(vs, "MariaDB "+v)
			}
			_ = db.Close()
		}
	}
	return vs
}
