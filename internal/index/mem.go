package index

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/eventline"
)

// Mem is the in-memory index of a session: its entries in log order
// and a map from id to position. It checks the tree as entries are added
// (a known parent, a new id) and knows nothing of files.
type Mem struct {
	Entries []eventline.Entry   // every event held, in log order
	ByID    map[uuid.UUID]int32 // id -> position in entries
	// Partial is set when the entries start at the HEAD the session was
	// opened with (a writer appending without the index), not at the
	// root.
	Partial bool
	// Outside, set for a fork, accepts a parent that is not in the
	// session's own log: an event of the prefix it inherits.
	Outside func(uuid.UUID) bool
}

// Last returns the newest entry, false if there is none.
func (x *Mem) Last() (*eventline.Entry, bool) {
	if len(x.Entries) == 0 {
		return nil, false
	}
	return &x.Entries[len(x.Entries)-1], true
}

// Truncate drops the entries from the first one drop matches onwards,
// leaving the valid prefix of a damaged session.
func (x *Mem) Truncate(drop func(e *eventline.Entry) bool) {
	for i := range x.Entries {
		if drop(&x.Entries[i]) {
			x.TruncateTo(i)
			return
		}
	}
}

// TruncateTo drops every entry from position n on.
func (x *Mem) TruncateTo(n int) {
	for _, e := range x.Entries[n:] {
		delete(x.ByID, e.ID)
	}
	x.Entries = x.Entries[:n]
}

// Add records a new entry in memory after checking it against the tree:
// its parent must be known and its id new.
func (x *Mem) Add(e *eventline.Entry) error {
	if len(x.Entries) == cap(x.Entries) {
		// Double the array: append grows a large slice by a quarter, so
		// a session of n events would copy about 5n entries into fresh
		// memory over its life, under the session's mutex; doubling copies
		// about 2n.
		grown := make([]eventline.Entry, len(x.Entries), max(2*cap(x.Entries), 256))
		copy(grown, x.Entries)
		x.Entries = grown
	}
	x.Entries = append(x.Entries, *e)
	return x.Adopt(1)
}

// Adopt indexes the last k entries, which the caller placed at the end of
// x.entries, checking each one's id is new and its parent known. On an
// error x.entries ends before the entry that failed.
func (x *Mem) Adopt(k int) error {
	for n := len(x.Entries) - k; n < len(x.Entries); n++ {
		e := &x.Entries[n]
		// In log order a parent usually is the previous event: skip the map.
		if e.ParentID != uuid.Nil && (n == 0 || x.Entries[n-1].ID != e.ParentID) {
			if _, ok := x.ByID[e.ParentID]; !ok && (x.Outside == nil || !x.Outside(e.ParentID)) {
				x.Entries = x.Entries[:n]
				return fmt.Errorf("event %s names unknown parent %s", e.ID, e.ParentID)
			}
		}
		x.ByID[e.ID] = int32(n)
		if len(x.ByID) != n+1 {
			// The id was already there: put the first occurrence back.
			id := e.ID
			x.Entries = x.Entries[:n]
			for i := range x.Entries {
				if x.Entries[i].ID == id {
					x.ByID[id] = int32(i)
					return fmt.Errorf("duplicate event id %s (first at position %d)", id, i)
				}
			}
		}
	}
	return nil
}
