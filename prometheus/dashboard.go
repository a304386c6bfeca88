package prometheus

import (
	"bytes"
	_ "embed"
)

//go:embed dashboard/distlock.json
var dashboard []byte

// Dashboard returns a Grafana dashboard of the Collector's metrics, as
// JSON (Grafana's dashboard model), to import into Grafana or to
// provision: acquisitions by outcome, acquisition waits, held locks,
// waiters, hold durations, renewals and their latency, losses, and call
// errors. Its data source is the variable DS_PROMETHEUS, chosen in
// Grafana; its queries assume the default namespace, "distlock". Each
// call returns a new copy.
func Dashboard() []byte {
	return bytes.Clone(dashboard)
}
