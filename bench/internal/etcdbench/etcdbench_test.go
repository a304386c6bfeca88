package etcdbench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMetricsSum(t *testing.T) {
	before := Metrics{
		`grpc_server_msg_received_total{grpc_method="LeaseKeepAlive",grpc_service="etcdserverpb.Lease",grpc_type="bidi_stream"}`: 5,
		`grpc_server_msg_received_total{grpc_method="Txn",grpc_service="etcdserverpb.KV",grpc_type="unary"}`:                     7,
		`etcd_debugging_mvcc_slow_watcher_total`: 0,
	}
	after := Metrics{
		`grpc_server_msg_received_total{grpc_method="LeaseKeepAlive",grpc_service="etcdserverpb.Lease",grpc_type="bidi_stream"}`: 12,
		`grpc_server_msg_received_total{grpc_method="Txn",grpc_service="etcdserverpb.KV",grpc_type="unary"}`:                     9,
		`etcd_debugging_mvcc_slow_watcher_total`: 1,
	}
	if d := before.Delta(after, "grpc_server_msg_received_total", `grpc_method="LeaseKeepAlive"`); d != 7 {
		t.Errorf("keep-alive delta %v, want 7", d)
	}
	if s := after.Sum("grpc_server_msg_received_total"); s != 21 {
		t.Errorf("sum %v, want 21", s)
	}
	if s := after.Sum("etcd_debugging_mvcc_slow_watcher_total"); s != 1 {
		t.Errorf("gauge %v, want 1", s)
	}
}

func TestReport(t *testing.T) {
	r := NewResults()
	for i, v := range []float64{10, 20, 30} {
		r.Add("a", Concurrency, "ops", v)
		r.Add("a", Distlock, "ops", v*float64(i+1))
	}
	if q := r.Ratio("a", Distlock, Concurrency, "ops"); q != 2 {
		t.Errorf("ratio %v, want 2", q)
	}
	if m := r.Med("a", Distlock, "ops"); m != 40 {
		t.Errorf("median %v, want 40", m)
	}
	if !math.IsNaN(r.Med("a", DistlockFair, "ops")) {
		t.Error("a median of nothing")
	}
	f := filepath.Join(t.TempDir(), "x.md")
	_ = os.WriteFile(f, []byte("head\n<!-- etcdbench:begin -->\nold\n<!-- etcdbench:end -->\ntail\n"), 0o644)
	if err := Splice(f, "new\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(f)
	if s := string(b); !strings.Contains(s, "head\n<!-- etcdbench:begin -->\nnew\n<!-- etcdbench:end -->\ntail") {
		t.Errorf("spliced: %q", s)
	}
}
