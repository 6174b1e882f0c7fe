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
}

// ForkPoint is an event of another session: where a fork's history starts.
type ForkPoint struct {
	Session uuid.UUID
	Event   uuid.UUID
}
