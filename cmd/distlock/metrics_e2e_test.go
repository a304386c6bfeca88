//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	distlockprom "github.com/distlock/distlock/prometheus"
	"github.com/distlock/distlock/redistest"
)

// requirePrometheusEnv, when set, makes TestMetricsPrometheus fail
// rather than skip without a prometheus binary: CI sets it.
const requirePrometheusEnv = "DISTLOCK_REQUIRE_PROMETHEUS"

// prometheusTimeout bounds the start of Prometheus and each wait for
// what it has scraped.
const prometheusTimeout = 15 * time.Second

// TestMetricsPrometheus runs a command under run --metrics-addr
// 127.0.0.1:0 --ttl 1s against a redis-server of its own, while another
// run holds the lock, and has a real Prometheus server, started by the
// test, scrape the address that run --verbose says it serves on.
// Prometheus's query API then shows, through the dashboard's own queries,
// the run waiting (Waiters: 1), then, once the other run has ended, the
// lock held (Held locks: 1), renewed (Renewals/s of result ok above 0,
// their latency p99 above 0) and acquired (Acquisitions/s has outcome
// ok); and it accepts every query (expr) of the dashboard that distlock
// dashboard prints, its Grafana variables replaced. Without a prometheus
// binary it skips, unless $DISTLOCK_REQUIRE_PROMETHEUS is set.
func TestMetricsPrometheus(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv(requirePrometheusEnv) == "" {
			t.Skipf("no prometheus binary (%v): install Debian's prometheus (scripts/deps.sh), or set %s=1 to make this a failure", err, requirePrometheusEnv)
		}
		t.Fatalf("no prometheus binary, and %s is set: %v", requirePrometheusEnv, err)
	}
	srv := redistest.Start(t)
	dir := t.TempDir()
	firstOut, firstGo := filepath.Join(dir, "first-out"), filepath.Join(dir, "first-go")
	first := start(t, []string{"OUT=" + firstOut, "GO=" + firstGo}, "run", "--redis", srv.URL(),
		"scraped", "--", "sh", "-c", holdUntilGo)
	awaitFile(t, firstOut)
	out, goFile := filepath.Join(dir, "out"), filepath.Join(dir, "go")
	p := start(t, []string{"OUT=" + out, "GO=" + goFile}, "run", "--redis", srv.URL(), "--verbose",
		"--ttl", "1s", "--metrics-addr", "127.0.0.1:0", "scraped", "--", "sh", "-c", holdUntilGo)
	served := regexp.MustCompile(`(?m)^distlock run: serving metrics on http://(127\.0\.0\.1:\d+)/metrics$`)
	var target string
	eventually(t, "run --verbose to say where it serves metrics", func() bool {
		m := served.FindStringSubmatch(p.errOut())
		if m != nil {
			target = m[1]
		}
		return m != nil
	})

	prom := startPrometheus(t, bin, target)
	exprs := dashboardExprs(t, distlockprom.Dashboard())
	if len(exprs) == 0 {
		t.Fatal("the dashboard has no expr")
	}
	panel := func(metric string) string { // the dashboard's query of metric
		t.Helper()
		for _, e := range exprs {
			if strings.Contains(e, metric) {
				return e
			}
		}
		t.Fatalf("the dashboard has no query of %s", metric)
		return ""
	}
	prom.await(t, panel("distlock_waiters"), "1 while the other run holds the lock", func(v []float64) bool {
		return len(v) == 1 && v[0] == 1
	})
	if err := os.WriteFile(firstGo, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := first.wait(); code != 0 {
		t.Fatalf("the first run: exit status %d; stderr:\n%s", code, first.errOut())
	}
	awaitFile(t, out)
	prom.await(t, panel("distlock_held_locks"), "1 while the command runs", func(v []float64) bool {
		return len(v) == 1 && v[0] == 1
	})
	prom.await(t, panel("distlock_waiters"), "0 once the run holds the lock", func(v []float64) bool {
		return len(v) == 1 && v[0] == 0
	})
	prom.await(t, `distlock_acquire_duration_seconds_count{outcome="ok"}`, "at least 1", func(v []float64) bool {
		return len(v) == 1 && v[0] >= 1
	})
	prom.await(t, panel("distlock_acquire_duration_seconds_count"), "a series (outcome ok)", func(v []float64) bool {
		return len(v) == 1
	})
	prom.await(t, panel("distlock_renewals_total"), "renewals of result ok above 0/s (a renewal every third of the 1 s lease)", func(v []float64) bool {
		return len(v) == 1 && v[0] > 0
	})
	prom.await(t, panel("distlock_renewal_duration_seconds_bucket"), "a renewal latency p99 above 0", func(v []float64) bool {
		return len(v) == 1 && v[0] > 0 && !math.IsNaN(v[0]) && !math.IsInf(v[0], 0)
	})
	empty := 0
	for _, expr := range exprs {
		r := prom.query(t, expr)
		switch {
		case r.Status != "success":
			t.Errorf("Prometheus refused the dashboard's query %s: %s: %s", expr, r.ErrorType, r.Error)
		case len(r.Data.Result) == 0:
			empty++ // a rate needs two scrapes, a loss a loss: accepted is what counts
		}
	}
	t.Logf("Prometheus accepted the dashboard's %d queries; %d had no series yet", len(exprs), empty)

	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("run: exit status %d; stderr:\n%s", code, p.errOut())
	}
}

// A prometheusServer is a Prometheus server started by a test.
type prometheusServer struct {
	addr string // 127.0.0.1:PORT of its web UI and API
}

// startPrometheus starts bin, a Prometheus server, on a free loopback
// port, with a configuration that scrapes target every second and a
// storage directory of its own, and waits until it is ready. It is
// stopped, by its pid, when the test ends.
func startPrometheus(t *testing.T, bin, target string) *prometheusServer {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: distlock
    static_configs:
      - targets: [%q]
`, target)
	if err := os.WriteFile(config, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	// A port found free may be taken before Prometheus binds it: try
	// another then.
	for attempt := 1; ; attempt++ {
		addr := freeAddr(t)
		logPath := filepath.Join(dir, fmt.Sprintf("prometheus-%d.log", attempt))
		log, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
			"--web.listen-address="+addr, "--log.level=warn")
		cmd.Stdout, cmd.Stderr = log, log
		err = cmd.Start()
		log.Close()
		if err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		t.Cleanup(func() {
			// By its pid: SIGTERM, then SIGKILL if it lingers.
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
			if t.Failed() {
				t.Logf("prometheus's log:\n%s", readFile(t, logPath))
			}
		})
		ps := &prometheusServer{addr: addr}
		err = ps.awaitReady(exited)
		if err == nil {
			return ps
		}
		logText := readFile(t, logPath)
		if errors.Is(err, errPrometheusExited) && strings.Contains(logText, "address already in use") && attempt < 3 {
			continue
		}
		t.Fatalf("prometheus on %s: %v; its log:\n%s", addr, err, logText)
	}
}

var errPrometheusExited = errors.New("prometheus exited")

// awaitReady waits until the server answers that it is ready, or has
// exited.
func (ps *prometheusServer) awaitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(prometheusTimeout)
	for {
		select {
		case <-exited:
			return errPrometheusExited
		default:
		}
		if r, err := http.Get("http://" + ps.addr + "/-/ready"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %v", prometheusTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A queryResult is the answer of Prometheus's /api/v1/query.
type queryResult struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"` // [time, "value"]
		} `json:"result"`
	} `json:"data"`
}

// query runs the instant query expr.
func (ps *prometheusServer) query(t *testing.T, expr string) queryResult {
	t.Helper()
	r, err := http.Get("http://" + ps.addr + "/api/v1/query?" + url.Values{"query": {expr}}.Encode())
	if err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	defer r.Body.Close()
	var res queryResult
	if err := json.NewDecoder(r.Body).Decode(&res); err != nil {
		t.Fatalf("query %s: %s, undecodable answer: %v", expr, r.Status, err)
	}
	return res
}

// values returns the values of a vector result, sorted.
func (res queryResult) values(t *testing.T) []float64 {
	t.Helper()
	var vs []float64
	for _, s := range res.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			t.Fatalf("sample %v of %v: %v", s.Value, s.Metric, err)
		}
		vs = append(vs, v)
	}
	sort.Float64s(vs)
	return vs
}

// await queries expr until its values satisfy ok (Prometheus has
// scraped them), within prometheusTimeout; want says what ok wants.
func (ps *prometheusServer) await(t *testing.T, expr, want string, ok func([]float64) bool) {
	t.Helper()
	deadline := time.Now().Add(prometheusTimeout)
	for {
		res := ps.query(t, expr)
		if res.Status != "success" {
			t.Fatalf("query %s: %s: %s", expr, res.ErrorType, res.Error)
		}
		vs := res.values(t)
		if ok(vs) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v after %v, want %s", expr, vs, prometheusTimeout, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// grafanaVar is a Grafana variable in a query: $name, ${name} or
// ${name:format}, or [[name]].
var grafanaVar = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]`)

// dashboardExprs returns every expr of the Grafana dashboard dash (JSON),
// with Grafana's variables replaced as Grafana would on a refresh: its
// intervals ($__rate_interval, $__interval, $__range) by 1m, and the
// dashboard's own variables by their "All" value (a regular expression
// that matches everything, in label matchers). A variable it does not
// know fails the test.
func dashboardExprs(t *testing.T, dash []byte) []string {
	t.Helper()
	var d any
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	values := map[string]string{"__rate_interval": "1m", "__interval": "1m", "__range": "1m"}
	if root, ok := d.(map[string]any); ok {
		if tmpl, ok := root["templating"].(map[string]any); ok {
			list, _ := tmpl["list"].([]any)
			for _, v := range list {
				v, _ := v.(map[string]any)
				name, _ := v["name"].(string)
				if typ, _ := v["type"].(string); typ == "datasource" || name == "" {
					continue
				}
				all, _ := v["allValue"].(string)
				if all == "" {
					all = ".*"
				}
				values[name] = all
			}
		}
	}
	var exprs []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && k == "expr" {
					exprs = append(exprs, s)
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(d)
	for i, expr := range exprs {
		exprs[i] = grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
			sub := grafanaVar.FindStringSubmatch(m)
			name := sub[1] + sub[2] + sub[3]
			v, ok := values[name]
			if !ok {
				t.Errorf("the dashboard's query %s uses the variable %s, which the test does not know", expr, m)
				return m
			}
			return v
		})
	}
	sort.Strings(exprs)
	return exprs
}
