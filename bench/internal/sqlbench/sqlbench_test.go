package sqlbench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSQLSmoke runs every scenario with tiny counts for every library on
// real servers (a PostgreSQL and a MariaDB of package sqltest): every
// scenario must make pairs, and in c no holder may enter while another is
// inside, nor any increment of the shared counter be lost. About 15 s
// under -race; -short skips it.
func TestSQLSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and MariaDB")
	}
	srv, err := StartServers(true, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	const d = 150 * time.Millisecond
	for _, lib := range append(slices.Clone(Libs), AdvisoryTx) {
		t.Run(lib, func(t *testing.T) {
			meter := func() time.Duration { return srv.CPU(lib) }
			newLocker := func(conns int) Locker {
				t.Helper()
				l, err := NewLocker(lib, srv.DSNs(), Options{Conns: conns})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := l.Close(); err != nil {
						t.Errorf("close: %v", err)
					}
				})
				return l
			}
			for _, g := range []int{1, 3} { // a, b
				r, err := Uncontended(newLocker(g), "smoke/"+lib+"/", g, d, meter)
				if err != nil {
					t.Fatalf("%d goroutines: %v", g, err)
				}
				if r.Pairs == 0 || r.Secs <= 0 || r.ServerCPU < 0 {
					t.Fatalf("%d goroutines: %+v", g, r)
				}
				t.Logf("%d goroutines: %.0f pairs/s, server CPU %.0f µs/pair", g, r.PerS(), r.ServerPerPair())
			}
			if lib == AdvisoryTx {
				return // a diagnostic of scenario a only
			}
			// c: 2 clients × 2 goroutines on one name.
			cr, err := Contended([]Locker{newLocker(2), newLocker(2)}, 2, "smoke/"+lib+"/c", time.Millisecond, 2*d, meter)
			if err != nil {
				t.Fatalf("contended: %v", err)
			}
			t.Logf("contended: %d acquisitions (%v per goroutine before the stop), counter %d, violations %d, cancelled %d, Jain %.3f",
				cr.Acquisitions, cr.Counts, cr.Counter, cr.Violations, cr.Cancelled, cr.Jain)
			if cr.Acquisitions == 0 || cr.AcqPerS == 0 || len(cr.Counts) != 4 {
				t.Errorf("contended: no acquisitions: %+v", cr)
			}
			if cr.Violations != 0 || cr.Counter != cr.Acquisitions {
				t.Errorf("contended: mutual exclusion broken: %d violations, counter %d after %d acquisitions", cr.Violations, cr.Counter, cr.Acquisitions)
			}
			// e: 2 hand-overs between two clients.
			hr, err := Handover(newLocker(1), newLocker(1), "smoke/"+lib+"/e/", 2, 5*time.Millisecond, time.Second)
			if err != nil {
				t.Fatalf("handover: %v", err)
			}
			t.Logf("handover: %v (Unlock calls %v), %d over the cap, %d skipped", hr.Handovers, hr.Releases, hr.Capped, hr.Skipped)
			if len(hr.Handovers) == 0 || len(hr.Handovers)+hr.Skipped != 2 {
				t.Errorf("handover: %+v", hr)
			}
			// pglock's waiter sleeps its lease (30 s) between attempts: its
			// rounds hit the cap. The others' must not.
			if lib != PGLock && hr.Capped != 0 {
				t.Errorf("handover: %d rounds over the 1 s cap: %v", hr.Capped, hr.Handovers)
			}
		})
	}
	if cpu := srv.CPU(Advisory); cpu <= 0 {
		t.Errorf("PostgreSQL's CPU: %v", cpu)
	}
	if cpu := srv.CPU(MySQLLock); cpu <= 0 {
		t.Errorf("MariaDB's CPU: %v", cpu)
	}
}

func TestTreeCPU(t *testing.T) {
	d, err := TreeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(end) { // burn some CPU
	}
	d2, err := TreeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d2 <= d {
		t.Errorf("CPU did not move: %v then %v", d, d2)
	}
}

// TestReport checks the baselines and the markers of the report; the
// figures' Results and formats are harness's (TestResults).
func TestReport(t *testing.T) {
	if Baseline(DistlockMariaDB) != MySQLLock || Baseline(PGLock) != Advisory {
		t.Error("baselines")
	}
	f := filepath.Join(t.TempDir(), "x.md")
	_ = os.WriteFile(f, []byte("head\n<!-- sqlbench:begin -->\nold\n<!-- sqlbench:end -->\ntail\n"), 0o644)
	if err := Splice(f, "new\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(f)
	if s := string(b); !strings.Contains(s, "head\n<!-- sqlbench:begin -->\nnew\n<!-- sqlbench:end -->\ntail") {
		t.Errorf("spliced: %q", s)
	}
}
