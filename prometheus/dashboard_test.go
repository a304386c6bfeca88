package prometheus_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	distlockprom "github.com/distlock/distlock/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// grafanaDashboard is the part of Grafana's dashboard model the tests read.
type grafanaDashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int         `json:"id"`
		Type       string      `json:"type"`
		Title      string      `json:"title"`
		Datasource *datasource `json:"datasource"`
		Targets    []struct {
			Expr       string      `json:"expr"`
			RefID      string      `json:"refId"`
			Datasource *datasource `json:"datasource"`
		} `json:"targets"`
	} `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

const dsVariable = "${DS_PROMETHEUS}"

// TestDashboardJSON: the dashboard is valid JSON of Grafana's model: a
// data source variable, which every panel and query uses, and the panels
// the spec asks for, each with queries.
func TestDashboardJSON(t *testing.T) {
	raw := distlockprom.Dashboard()
	if !json.Valid(raw) {
		t.Fatal("the dashboard is not valid JSON")
	}
	var d grafanaDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q", d.UID, d.Title)
	}
	hasDS := false
	for _, v := range d.Templating.List {
		if v.Type == "datasource" {
			hasDS = v.Name == "DS_PROMETHEUS" && string(v.Query) == `"prometheus"`
		} else if v.Datasource == nil || v.Datasource.UID != dsVariable {
			t.Errorf("variable %s: data source %v, want %s", v.Name, v.Datasource, dsVariable)
		}
	}
	if !hasDS {
		t.Error("no data source variable DS_PROMETHEUS of type prometheus")
	}
	ids := map[int]bool{}
	var titles []string
	for _, p := range d.Panels {
		titles = append(titles, p.Title)
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Datasource == nil || p.Datasource.UID != dsVariable {
			t.Errorf("panel %q: data source %v", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if q.Expr == "" || q.RefID == "" || q.Datasource == nil || q.Datasource.UID != dsVariable {
				t.Errorf("panel %q: query %+v", p.Title, q)
			}
		}
	}
	for _, want := range []string{"Acquisitions/s by outcome", "Acquire wait p50 / p99", "Held locks", "Waiters",
		"Hold duration p99", "Renewals/s by result", "Renewal latency p99", "Losses by reason", "Call errors"} {
		if !slices.ContainsFunc(titles, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("no panel %q in %q", want, titles)
		}
	}

	raw[0] = 'x'
	if distlockprom.Dashboard()[0] != '{' {
		t.Error("Dashboard returns the embedded bytes, not a copy")
	}
}

// TestDashboardMetrics: every query of the dashboard (panels and
// variables) names only metrics that the Collector exports, and labels
// they have (see checkExprs), and every metric has a panel.
func TestDashboardMetrics(t *testing.T) {
	var d grafanaDashboard
	if err := json.Unmarshal(distlockprom.Dashboard(), &d); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			exprs = append(exprs, v.Definition)
		}
	}
	used := checkExprs(t, exprs)
	for name := range spec {
		if !used[name] {
			t.Errorf("the dashboard does not show %s", name)
		}
	}
}

// TestAlertMetrics: the alerts that the README and the package
// documentation suggest name only metrics and labels of the Collector.
func TestAlertMetrics(t *testing.T) {
	var exprs []string
	for file, prefix := range map[string]string{"README.md": "expr: ", "doc.go": "//\t"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for line := range strings.Lines(string(b)) {
			_, expr, ok := strings.Cut(line, prefix)
			if expr = strings.TrimSpace(expr); ok && strings.Contains(expr, "distlock_") && !strings.HasPrefix(expr, "#") &&
				strings.ContainsAny(expr, "<>") {
				exprs = append(exprs, expr)
				n++
			}
		}
		if n != 4 {
			t.Errorf("%s: %d alerts, want 4", file, n)
		}
	}
	checkExprs(t, exprs)
}

// checkExprs checks that the PromQL expressions exprs name only metrics
// that the Collector exports, with a _bucket, _sum or _count suffix for
// histograms only, and match and group by only labels those metrics have.
// It returns the metrics they name, without suffixes.
func checkExprs(t *testing.T, exprs []string) map[string]bool {
	t.Helper()
	labels := described(t, distlockprom.New())
	types := exportedTypes(t)
	for name := range labels {
		if _, ok := types[name]; !ok {
			t.Errorf("%s is described but never exported", name)
		}
	}
	used := map[string]bool{}
	for _, expr := range exprs {
		names, matched, grouped := parseExpr(expr)
		if len(names) == 0 {
			t.Errorf("%s: names no metric", expr)
		}
		have := map[string]bool{}
		for _, n := range names {
			base, suffix := n, ""
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, s); ok && labels[b] != nil {
					base, suffix = b, s
				}
			}
			if labels[base] == nil {
				t.Errorf("%s: %s is not a metric of the Collector", expr, n)
				continue
			}
			if suffix != "" && types[base] != dto.MetricType_HISTOGRAM {
				t.Errorf("%s: %s of %s, a %v", expr, suffix, base, types[base])
			}
			used[base] = true
			for _, l := range labels[base] {
				have[l] = true
			}
			if suffix == "_bucket" {
				have["le"] = true
			}
		}
		for _, l := range append(matched, grouped...) {
			if !have[l] {
				t.Errorf("%s: label %q is not one of %v", expr, l, names)
			}
		}
	}
	return used
}

var (
	stringRE   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	rangeRE    = regexp.MustCompile(`\[[^\]]*\]`)
	selectorRE = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	groupRE    = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	prefixedRE = regexp.MustCompile(`\bdistlock_[a-zA-Z0-9_:]*`)
)

// parseExpr returns the metric names of a PromQL expression (those with a
// selector, and any word of the prefix distlock_), the labels its
// selectors match, and those it groups by.
func parseExpr(expr string) (names, matched, grouped []string) {
	e := rangeRE.ReplaceAllString(stringRE.ReplaceAllString(expr, `""`), "")
	for _, m := range selectorRE.FindAllStringSubmatch(e, -1) {
		names = append(names, m[1])
		for _, l := range matcherRE.FindAllStringSubmatch(m[2], -1) {
			matched = append(matched, l[1])
		}
	}
	names = append(names, prefixedRE.FindAllString(selectorRE.ReplaceAllString(e, ""), -1)...)
	for _, m := range groupRE.FindAllStringSubmatch(e, -1) {
		for l := range strings.SplitSeq(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				grouped = append(grouped, l)
			}
		}
	}
	return names, matched, grouped
}

// exportedTypes feeds a Collector a call and an event of each kind it
// counts, and returns the type of each metric it then exports.
func exportedTypes(t *testing.T) map[string]dto.MetricType {
	t.Helper()
	col := distlockprom.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	call := distlock.Call{Op: "lock", Name: "x", Lock: distlock.KindMutex, Store: "redis"}
	col.EndCall(col.StartCall(context.Background(), call), call, distlock.CallResult{Outcome: distlock.OutcomeOK, Duration: time.Millisecond})
	for _, k := range []distlock.EventKind{distlock.EventAcquired, distlock.EventWaiting, distlock.EventRenewed, distlock.EventLost, distlock.EventEnded} {
		col.Event(distlock.Event{Kind: k, Name: "x", Lock: distlock.KindMutex, Store: "redis", Holds: 1, Reason: distlock.LossGone})
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]dto.MetricType{}
	for _, f := range fams {
		types[f.GetName()] = f.GetType()
	}
	return types
}
