package catalogue

import (
	"time"

	"github.com/google/uuid"
)

// Meta is a session's metadata as the catalogue records it: the members
// of session.json the store's listings return, with nothing of their own
// meaning here. The store turns its public metadata into a Meta and back
// at its boundary, member for member; DecodeRecord gives each decoded
// Meta maps and pointers of its own.
type Meta struct {
	ID         uuid.UUID
	Name       string
	WorkingDir string
	Model      string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	Labels     map[string]string

	// ForkedFrom is nil but for a fork: the session and the event its
	// history starts from.
	ForkedFrom    *ForkPoint
	ParentSession uuid.UUID
	SpawnedBy     uuid.UUID
	Depth         int
	// Encrypted is set for an encrypted session (its records sealed).
	Encrypted bool
	// Usage is the session's recorded token totals (nil: none recorded).
	Usage *Usage
}

// Usage is a session's token totals as session.json records them: those
// of its first Events events, the last of them Through, by model (sorted
// by name; the order is kept, not checked).
type Usage struct {
	Events  int64
	Through uuid.UUID
	Models  []ModelUsage
}

// ModelUsage is one model's totals: messages, then input, output, cache
// read and cache write tokens.
type ModelUsage struct {
	Model                                          string
	Messages, Input, Output, CacheRead, CacheWrite int64
}

// ForkPoint is an event of another session: where a fork's history starts.
type ForkPoint struct {
	Session uuid.UUID
	Event   uuid.UUID
}
