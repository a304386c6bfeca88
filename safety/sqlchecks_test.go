//go:build linux

package safety

import (
	"math/rand"
	"strings"
	"testing"
	"time"
)

// TestSQLCheckerFlags feeds the SQL mode's timeline checks (checkSQL)
// made-up samples and histories, one violation at a time, and checks that
// each is flagged (and that the clean history is not): a check that can
// never fail checks nothing.
func TestSQLCheckerFlags(t *testing.T) {
	const (
		plain = "p"
		fair  = "f"
		ms    = int64(time.Millisecond)
		L     = 2 * time.Second
		us    = int64(1_000_000_000) // the database's clock at the run's start, µs
	)
	proc := &clientProc{id: 1}
	// sample makes a sample sent at at ms (returned 1 ms later), the
	// database's clock at the same time, with rows.
	sample := func(at int64, rows map[string]*sqlRow) sqlSample {
		return sqlSample{Send: at * ms, Recv: at*ms + ms, Now: us + at*1000, Rows: rows}
	}
	// until is a lease end at ms, on the database's clock.
	until := func(at int64) int64 { return us + at*1000 }
	acq := func(owner int64, name string, token uint64, call, ret int64, res string) *acquisition {
		return &acquisition{acq: record{K: "acq", Client: 1, Owner: owner, Name: name, Token: token, Call: call * ms, Ret: ret * ms, Res: res}, proc: proc}
	}
	enq := func(owner int64, name, secret, res string, call int64, token uint64) record {
		return record{K: "enq", Client: 1, Owner: owner, Name: name, Place: placeID(secret), Res: res, Call: call * ms, Ret: call*ms + ms, Token: token}
	}
	type input struct {
		samples []sqlSample
		byName  map[string][]*acquisition
		losses  []record
		reqs    []record
	}
	// The clean history: owner A (call 1) holds p with token 10 from 100
	// to 300 ms, then B (call 2) with token 11; C (call 3) waits for f
	// and gives up at 150 ms, its abandonment confirmed.
	clean := func() input {
		a, b, c := acq(1, plain, 10, 90, 100, "ok"), acq(2, plain, 11, 290, 300, "ok"), acq(3, fair, 0, 50, 150, "ctx")
		a.rel = &record{K: "rel", Call: 280 * ms, Ret: 281 * ms, Res: "ok"}
		held := func(owner string, token uint64, end int64) *sqlRow {
			return &sqlRow{Token: token, Kind: "mutex", Holders: []sqlHolder{{Owner: owner, Token: token, Until: until(end)}}}
		}
		waiting := &sqlRow{Kind: "fair-mutex", Token: 5, Queue: []sqlPlace{{Owner: "C", Until: until(2000)}}}
		gone := &sqlRow{Token: 5}
		return input{
			samples: []sqlSample{
				sample(60, map[string]*sqlRow{plain: {Token: 9}, fair: waiting}),
				sample(120, map[string]*sqlRow{plain: held("A", 10, 2100), fair: waiting}),
				sample(200, map[string]*sqlRow{plain: held("A", 10, 2100), fair: gone}),
				sample(320, map[string]*sqlRow{plain: held("B", 11, 2300), fair: gone}),
			},
			byName: map[string][]*acquisition{plain: {a, b}, fair: {c}},
			reqs: []record{enq(1, plain, "A", "acquired", 95, 10), enq(2, plain, "B", "acquired", 295, 11), enq(3, fair, "C", "queued", 55, 0),
				{K: "abok", Place: placeID("C"), T: 149 * ms}},
		}
	}
	for _, c := range []struct {
		what   string
		change func(in *input)
		flag   string // a word of the violation, "" for none
	}{
		{"clean", func(*input) {}, ""},
		{"a loss signalled after another owner held", func(in *input) {
			in.losses = []record{{K: "lost", Client: 1, Name: plain, Token: 10, T: 330 * ms}}
			in.byName[plain][0].rel = nil
		}, "losses signalled after"},
		{"a loss signalled in time", func(in *input) {
			in.losses = []record{{K: "lost", Client: 1, Name: plain, Token: 10, T: 250 * ms}}
			in.byName[plain][0].rel = nil
		}, ""},
		{"a place left after the give-up", func(in *input) {
			in.samples[2].Rows[fair] = in.samples[1].Rows[fair]
		}, "give-ups"},
		{"a place left, its abandonment not confirmed", func(in *input) {
			in.samples[2].Rows[fair] = in.samples[1].Rows[fair]
			in.reqs = in.reqs[:3]
		}, ""},
		{"a token held by another owner", func(in *input) {
			in.reqs[1] = enq(2, plain, "X", "acquired", 295, 11)
		}, "held by another owner"},
		{"two live holders of a mutex", func(in *input) {
			row := *in.samples[3].Rows[plain]
			row.Holders = append(row.Holders, sqlHolder{Owner: "A", Token: 10, Until: until(2100)})
			in.samples[3].Rows[plain] = &row
		}, "exclusive kinds held twice 1"},
		{"a token going back", func(in *input) {
			in.samples[3].Rows[plain] = &sqlRow{Token: 8}
		}, "tokens back 1"},
		{"a new holder not above the row's token", func(in *input) {
			in.samples[0].Rows[plain] = &sqlRow{Token: 10}
		}, "new holders not above it 1"},
		{"a lease above its bound", func(in *input) {
			in.samples[1].Rows[plain].Holders[0].Until = until(120 + 7000)
		}, "above their bound 1"},
		{"a holder's token not the one its request was told", func(in *input) {
			in.reqs[1].Token = 12
		}, "another token than"},
		{"a holder of an earlier attempt of the call", func(in *input) {
			in.byName[plain][1].acq.Token = 12
		}, ""},
		{"a kind mixed", func(in *input) {
			in.samples[2].Rows[fair] = &sqlRow{Token: 5, Kind: "mutex"}
		}, "kinds mixed 1"},
	} {
		t.Run(c.what, func(t *testing.T) {
			in := clean()
			c.change(&in)
			r := &chaosRun{t: t, rng: rand.New(rand.NewSource(1)), lease: L, names: []string{plain, fair},
				fair: map[string]time.Duration{fair: 2 * L}, elect: map[string]time.Duration{}, rw: map[string]time.Duration{}, sem: map[string]int{}}
			r.sql = &sqlRun{tl: &sqlTimeline{samples: in.samples}}
			byToken := map[string]*acquisition{}
			for name, as := range in.byName {
				for _, a := range as {
					if a.ok() {
						byToken[holdKey(name, a.acq.Token)] = a
					}
				}
			}
			for _, l := range in.losses {
				if a := byToken[holdKey(l.Name, l.Token)]; a != nil {
					lc := l
					a.lost = &lc
				}
			}
			r.checkSQL(&chaosReport{}, in.byName, in.losses, byToken, in.reqs)
			v := strings.Join(r.sql.report.violations(), "\n")
			switch {
			case c.flag == "" && v != "":
				t.Errorf("flagged: %s", v)
			case c.flag != "" && !strings.Contains(v, c.flag):
				t.Errorf("not flagged (want %q): %q", c.flag, v)
			}
		})
	}
}
