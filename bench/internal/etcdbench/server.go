// Package etcdbench benchmarks distlock's etcd store (etcdstore) against
// go.etcd.io/etcd/client/v3/concurrency's Mutex on one embedded etcd
// cluster, in one run: uncontended pairs, contended owner changes with
// Jain's fairness index, hand-over latency, and the cost of many held
// locks (heap, and the requests the server sees per renewal). See
// cmd/etcdbench and ../../README.md.
package etcdbench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/distlock/distlock/bench/internal/harness"
	"github.com/distlock/distlock/etcdtest"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// serverEnv carries a ServerConfig to a re-executed binary, which then
// runs the cluster instead of its main.
const serverEnv = "ETCDBENCH_SERVER"

// A ServerConfig says how to run the cluster. The zero value of every
// knob is etcdtest's setting: etcdtest.NewCluster runs the members (50 ms
// heartbeat, 500 ms election timeout, no fsync, etcd's other defaults).
// Setting a knob runs a single member configured the same way except for
// it (Members must then be 1).
type ServerConfig struct {
	Members int
	// TickMs and ElectionMs: Raft heartbeat and election timeout.
	TickMs, ElectionMs uint `json:",omitempty"`
	// BatchInterval: the backend's commit interval (etcd's default 100 ms).
	BatchInterval time.Duration `json:",omitempty"`
	// GOMAXPROCS of the server process (0: the CPUs it may use).
	GOMAXPROCS int `json:",omitempty"`
}

// Custom reports whether a knob differs from etcdtest's.
func (c ServerConfig) Custom() bool {
	return c.TickMs != 0 || c.ElectionMs != 0 || c.BatchInterval != 0
}

// String describes the configuration.
func (c ServerConfig) String() string {
	s := fmt.Sprintf("%d member(s)", c.Members)
	if c.TickMs != 0 || c.ElectionMs != 0 {
		s += fmt.Sprintf(", heartbeat %d ms, election %d ms", c.TickMs, c.ElectionMs)
	}
	if c.BatchInterval != 0 {
		s += fmt.Sprintf(", backend batch interval %v", c.BatchInterval)
	}
	return s
}

// A Server is a cluster running in a child process (this binary,
// re-executed), so that its CPU, heap and garbage collector are not the
// clients', and it can be pinned to CPUs of its own.
type Server struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	Endpoints []string // the members' client URLs (not their proxies)
	Config    ServerConfig
}

// StartServer starts the cluster of cfg in a child process, pinned to cpus
// if any, and returns once every member serves clients.
func StartServer(cfg ServerConfig, cpus []int) (*Server, error) {
	if cfg.Members < 1 {
		return nil, fmt.Errorf("etcdbench: %d members", cfg.Members)
	}
	if cfg.Custom() && cfg.Members != 1 {
		return nil, fmt.Errorf("etcdbench: custom server settings need 1 member")
	}
	if cfg.GOMAXPROCS == 0 && len(cpus) > 0 {
		cfg.GOMAXPROCS = len(cpus)
	}
	cmd, stdin, stdout, err := harness.Reexec(serverEnv, cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{cmd: cmd, stdin: stdin, Config: cfg}
	if len(cpus) > 0 {
		if err := harness.Pin(cmd.Process.Pid, cpus); err != nil {
			s.Stop()
			return nil, err
		}
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if eps, ok := strings.CutPrefix(sc.Text(), "ENDPOINTS "); ok {
				line <- eps
				break
			}
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case eps, ok := <-line:
		if !ok {
			s.Stop()
			return nil, errors.New("etcdbench: the server process ended before serving")
		}
		s.Endpoints = strings.Split(eps, ",")
	case <-time.After(60 * time.Second):
		s.Stop()
		return nil, errors.New("etcdbench: the server process did not serve within 60 s")
	}
	// Threads the server made before the pin inherit nothing: pin again.
	if len(cpus) > 0 {
		if err := harness.Pin(cmd.Process.Pid, cpus); err != nil {
			s.Stop()
			return nil, err
		}
	}
	return s, nil
}

// PID is the server process's id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Stop stops the cluster and waits for its process (killing it after 20 s).
func (s *Server) Stop() {
	_ = s.stdin.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// Metrics scrapes the Prometheus metrics of the server process (from the
// first member: in-process members share one registry, so the figures are
// the whole process's). Keys are "name{labels}" as exposed.
func (s *Server) Metrics() (Metrics, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(s.Endpoints[0] + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := Metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// CPU is the user+system CPU time the server process has used.
func (s *Server) CPU() time.Duration { return procCPU(s.PID()) }

// RSS is the server process's resident set, in bytes.
func (s *Server) RSS() int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(s.PID()) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// procCPU is the user+system time of process pid from /proc (0 on error).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+2:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	sy, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+sy) * 10 * time.Millisecond
}

// Metrics are scraped Prometheus samples, "name{labels}" → value.
type Metrics map[string]float64

// Sum adds the samples of metric name whose labels contain every one of
// labels (each as `key="value"`).
func (m Metrics) Sum(name string, labels ...string) float64 {
	var t float64
	for k, v := range m {
		n, rest, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				ok = false
				break
			}
		}
		if ok {
			t += v
		}
	}
	return t
}

// Delta is after's Sum less m's.
func (m Metrics) Delta(after Metrics, name string, labels ...string) float64 {
	return after.Sum(name, labels...) - m.Sum(name, labels...)
}

// RunServerIfRequested runs the cluster and exits if this process was
// started by StartServer; otherwise it returns at once. Call it first in
// main (and in TestMain).
func RunServerIfRequested() {
	raw := os.Getenv(serverEnv)
	if raw == "" {
		return
	}
	var cfg ServerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "etcdbench server: bad config:", err)
		os.Exit(2)
	}
	if cfg.GOMAXPROCS > 0 {
		runtime.GOMAXPROCS(cfg.GOMAXPROCS)
	}
	var endpoints []string
	var stop func()
	if cfg.Custom() {
		e, dir, ep, err := startMember(cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "etcdbench server:", err)
			os.Exit(1)
		}
		endpoints = []string{ep}
		stop = func() { e.Close(); _ = os.RemoveAll(dir) }
	} else {
		cl, err := etcdtest.NewCluster(cfg.Members, "")
		if err != nil {
			fmt.Fprintln(os.Stderr, "etcdbench server:", err)
			os.Exit(1)
		}
		endpoints = cl.Endpoints()
		stop = func() { _ = cl.Stop() }
	}
	fmt.Printf("ENDPOINTS %s\n", strings.Join(endpoints, ","))
	// Until the parent closes stdin (or dies): then stop, and at most
	// 30 minutes in any case.
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(done) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	select {
	case <-done:
	case <-sig:
	case <-time.After(30 * time.Minute):
		fmt.Fprintln(os.Stderr, "etcdbench server: 30 minutes passed, stopping")
	}
	stop()
	os.Exit(0)
}

// startMember starts one member as etcdtest configures its members, with
// cfg's knobs, for the settings sweep.
func startMember(cfg ServerConfig) (*embed.Etcd, string, string, error) {
	dir, err := os.MkdirTemp("", "etcdbench-")
	if err != nil {
		return nil, "", "", err
	}
	ports := make([]int, 2)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, "", "", err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	c := embed.NewConfig()
	c.Name = "m0"
	c.Dir = dir + "/m0"
	client := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
	peer := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
	c.ListenClientUrls, c.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	c.ListenPeerUrls, c.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	c.InitialCluster = "m0=" + peer.String()
	c.ClusterState = embed.ClusterStateFlagNew
	c.UnsafeNoFsync = true
	c.TickMs = uint(etcdtest.HeartbeatInterval / time.Millisecond)
	c.ElectionMs = uint(etcdtest.ElectionTimeout / time.Millisecond)
	if cfg.TickMs != 0 {
		c.TickMs = cfg.TickMs
	}
	if cfg.ElectionMs != 0 {
		c.ElectionMs = cfg.ElectionMs
	}
	if cfg.BatchInterval != 0 {
		c.BackendBatchInterval = cfg.BatchInterval
	}
	c.EnableGRPCGateway = false
	c.Logger = "zap"
	c.LogLevel = "error"
	c.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(c)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", "", err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		_ = os.RemoveAll(dir)
		return nil, "", "", errors.New("member not ready after 30 s")
	}
	return e, dir, client.String(), nil
}
