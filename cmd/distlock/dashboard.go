package main

import (
	"flag"
	"os"

	distlockprom "github.com/distlock/distlock/prometheus"
)

var dashboardCommand = &command{
	name:     "dashboard",
	synopsis: "",
	summary:  "print a Grafana dashboard of the metrics of run --metrics-addr",
	doc: `Dashboard prints a Grafana dashboard, as JSON (Grafana's dashboard
model), of the metrics that "distlock run --metrics-addr" serves, and
that programs serve with the library's Prometheus collector
(github.com/distlock/distlock/prometheus): acquisitions by outcome,
acquisition waits, held locks, waiters, hold durations, renewals and
their latency, losses, and call errors. Import it in Grafana (Dashboards,
New, Import) or provision it from a file; it asks for a Prometheus data
source (its variable DS_PROMETHEUS), and its queries assume the
metrics' default names (distlock_...). It contacts no store.
`,
	examples: `  # Import it in Grafana: Dashboards, New, Import, Upload dashboard JSON file
  distlock dashboard > distlock-dashboard.json

  # Or have Grafana load it from a dashboards provider's directory
  distlock dashboard > /var/lib/grafana/dashboards/distlock.json
`,
	setup: func(fs *flag.FlagSet) func(commandLine) error {
		return func(line commandLine) error {
			if len(line.args) != 0 {
				return usageErrorf("unexpected argument %q: dashboard takes none (see distlock dashboard --help)", line.args[0])
			}
			_, err := os.Stdout.Write(distlockprom.Dashboard())
			return err
		}
	},
}
