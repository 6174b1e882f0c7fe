package index

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/eventline"
)

func entryOf(id, parent uuid.UUID) *eventline.Entry {
	return &eventline.Entry{Header: eventline.Header{ID: id, ParentID: parent, Kind: eventline.KindMessage}}
}

func ids(n int) []uuid.UUID {
	out := make([]uuid.UUID, n)
	for i := range out {
		out[i] = uuid.Must(uuid.NewV7())
	}
	return out
}

// held checks that x holds exactly want, in order, each found by id.
func held(t *testing.T, x *Mem, want ...uuid.UUID) {
	t.Helper()
	require.Len(t, x.Entries, len(want))
	assert.Len(t, x.ByID, len(want))
	for i, id := range want {
		assert.Equal(t, id, x.Entries[i].ID)
		assert.Equal(t, int32(i), x.ByID[id])
	}
}

func TestMemAdd(t *testing.T) {
	id := ids(4)
	x := &Mem{ByID: map[uuid.UUID]int32{}}
	require.NoError(t, x.Add(entryOf(id[0], uuid.Nil)))
	require.NoError(t, x.Add(entryOf(id[1], id[0])))
	require.NoError(t, x.Add(entryOf(id[2], id[0])), "a branch: a parent other than the previous event")

	err := x.Add(entryOf(id[3], uuid.New()))
	assert.ErrorContains(t, err, "unknown parent")
	held(t, x, id[:3]...)

	err = x.Add(entryOf(id[1], id[2]))
	assert.ErrorContains(t, err, "duplicate event id")
	held(t, x, id[:3]...)

	last, ok := x.Last()
	require.True(t, ok)
	assert.Equal(t, id[2], last.ID)
}

func TestMemOutside(t *testing.T) {
	id := ids(2)
	prefix := uuid.New()
	x := &Mem{ByID: map[uuid.UUID]int32{}, Outside: func(p uuid.UUID) bool { return p == prefix }}
	require.NoError(t, x.Add(entryOf(id[0], prefix)), "a fork's first event names its parent's")
	assert.Error(t, x.Add(entryOf(id[1], uuid.New())))
	held(t, x, id[0])
}

func TestMemAdoptStopsAtTheFirstBad(t *testing.T) {
	id := ids(4)
	x := &Mem{ByID: map[uuid.UUID]int32{}}
	x.Entries = append(x.Entries, *entryOf(id[0], uuid.Nil), *entryOf(id[1], id[0]), *entryOf(id[2], uuid.New()), *entryOf(id[3], id[1]))
	assert.Error(t, x.Adopt(4))
	held(t, x, id[:2]...)
}

func TestMemTruncate(t *testing.T) {
	id := ids(4)
	x := &Mem{ByID: map[uuid.UUID]int32{}}
	for i := range id {
		parent := uuid.Nil
		if i > 0 {
			parent = id[i-1]
		}
		require.NoError(t, x.Add(entryOf(id[i], parent)))
	}
	x.Truncate(func(e *eventline.Entry) bool { return e.ID == id[2] })
	held(t, x, id[:2]...)
	x.Truncate(func(*eventline.Entry) bool { return false })
	held(t, x, id[:2]...)
	x.TruncateTo(0)
	held(t, x)
	_, ok := x.Last()
	assert.False(t, ok)
}
