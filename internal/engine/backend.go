package engine

import "github.com/distlock/distlock/store"

// The engine drives a store.Store; these are its types under the names
// the engine's code uses. See package store for what they mean.
type (
	Backend        = store.Store
	Revoker        = store.RevokeWatcher
	GrantConfirmer = store.GrantConfirmer
	Kind           = store.Kind
	Notice         = store.Notice
	Request        = store.Request
	Grant          = store.Grant
	Release        = store.Release
)

const (
	Plain     = store.Plain
	Fair      = store.Fair
	Read      = store.Read
	Write     = store.Write
	Election  = store.Election
	Semaphore = store.Semaphore

	Freed           = store.Freed
	Remaining       = store.Remaining
	NotOwner        = store.NotOwner
	AlreadyReleased = store.AlreadyReleased
)

// GranteeID and AbandonFor: see package store.
var (
	GranteeID  = store.GranteeID
	AbandonFor = store.AbandonFor
)
