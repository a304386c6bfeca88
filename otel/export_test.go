package otel

// Holds is the number of holds o keeps track of: those between their
// EventAcquired and their EventEnded.
func Holds(o *Observer) int { return o.leases.len() }
