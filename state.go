package sessionstore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Session state
//
// A session may keep a small key-value state (what a harness keeps for
// permissions, a todo list, a mode), changed by deltas that are events on
// its path: custom events whose record is
//
//	{"sessionstore":"state","set":{"<key>":<JSON value>, ...},"delete":["<key>", ...]}
//
// so that the state as of any event, on any branch, lane or fork, is the
// deltas on the path from the root to it applied in order (State). Like a
// workspace manifest, the record's first member is reserved (see
// Workspaces).

// StateDelta is a change of a session's state: keys set to JSON values,
// then keys removed.
type StateDelta struct {
	Set    map[string]json.RawMessage `json:"set,omitempty"`
	Delete []string                   `json:"delete,omitempty"`
}

type stateRecord struct {
	Tag string `json:"sessionstore"`
	StateDelta
}

// MaxStateKey is the longest key of a session's state, in bytes.
const MaxStateKey = 1024

// AppendState appends the delta d as an event of the session (Append's
// rules and durability): State as of that event and its descendants has
// d applied.
//
// Errors: as Append; ErrInvalidEvent for an empty delta, an empty key, a
// key that is not valid UTF-8 or longer than MaxStateKey, or a value that
// is not JSON.
func (s *Store) AppendState(ctx context.Context, session uuid.UUID, d StateDelta) (Event, error) {
	if len(d.Set) == 0 && len(d.Delete) == 0 {
		return Event{}, fmt.Errorf("%w: an empty state delta", ErrInvalidEvent)
	}
	check := func(k string) error {
		if k == "" || len(k) > MaxStateKey || !utf8.ValidString(k) {
			return fmt.Errorf("%w: state key %q: empty, longer than %d bytes or not UTF-8", ErrInvalidEvent, k, MaxStateKey)
		}
		return nil
	}
	for k, v := range d.Set {
		if err := check(k); err != nil {
			return Event{}, err
		}
		if !json.Valid(v) {
			return Event{}, fmt.Errorf("%w: state key %q: the value is not JSON", ErrInvalidEvent, k)
		}
	}
	for _, k := range d.Delete {
		if err := check(k); err != nil {
			return Event{}, err
		}
	}
	rec, err := json.Marshal(stateRecord{Tag: stateTag, StateDelta: d})
	if err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	return s.Append(ctx, session, Event{Kind: KindCustom, Record: rec, reserved: true})
}

// State returns the session's state as of event at (uuid.Nil: the end of
// the active path): the deltas on the path from the root to at applied
// in order. A path without deltas has an empty state (a non-nil map).
//
// Errors: ErrNotFound for a session or event the store does not have;
// *CorruptionError for a delta that does not decode; as Event.
func (s *Store) State(ctx context.Context, session, at uuid.UUID) (map[string]json.RawMessage, error) {
	_, ids, err := s.markedEvents(ctx, session, at, stateTag)
	if err != nil {
		return nil, err
	}
	state := map[string]json.RawMessage{}
	for i := len(ids) - 1; i >= 0; i-- {
		rec, ok, err := s.markedRecord(ctx, session, ids[i], stateTag)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		var r stateRecord
		if err := json.Unmarshal(rec, &r); err != nil || r.Tag != stateTag {
			return nil, corruptf(s.sessionDir(session), 0, "event %s: state delta: %v", ids[i], err)
		}
		maps.Copy(state, r.Set)
		for _, k := range r.Delete {
			delete(state, k)
		}
	}
	return state, nil
}
