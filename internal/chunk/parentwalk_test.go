package chunk

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// pathLines returns the chunk lines of a chain of n events in chunk 0,
// each naming its parent's location (the first none), with their entries;
// bad, when not nil, changes the parent location the line of event i
// names.
func pathLines(n int, bad func(i int, at *eventline.Location, es []eventline.Entry)) ([]byte, []eventline.Entry) {
	var b []byte
	var es []eventline.Entry
	parent := uuid.Nil
	var at eventline.Location
	for i := range n {
		h := eventline.Header{ID: uuid.Must(uuid.NewV7()), ParentID: parent, Time: int64(i + 1), Kind: eventline.KindMessage, Role: eventline.RoleUser}
		p := eventline.Inline([]byte(fmt.Sprintf(`{"n":%d}`, i)))
		p.ParentAt = at
		if bad != nil {
			bad(i, &p.ParentAt, es)
		}
		start := len(b)
		b = eventline.AppendEvent(b, &h, p)
		loc := eventline.Location{Chunk: 0, Offset: int64(start), Length: uint32(len(b) - start)}
		es = append(es, eventline.NewEntry(h, p, loc))
		parent, at = h.ID, loc
	}
	return b, es
}

// TestParentWalk: the walk reads a path from its newest event to the
// root by the parent locations, and reports a line that does not hold
// the event expected, or names no parent location, or one not before it.
func TestParentWalk(t *testing.T) {
	const dir = "/c"
	path0 := filepath.Join(dir, layout.ChunkName(0))
	for _, tc := range []struct {
		name string
		bad  func(i int, at *eventline.Location, es []eventline.Entry)
		head func(es []eventline.Entry) eventline.Entry
		walk int    // lines read before the error (or all of them)
		err  string // "" for none, "noparent", or the corrupt offset's line
		at   int    // the line whose offset the damage names
	}{
		{name: "whole path", walk: 5},
		{name: "format 1 line", bad: func(i int, at *eventline.Location, es []eventline.Entry) {
			if i == 2 {
				*at = eventline.Location{}
			}
		}, walk: 3, err: "noparent"},
		{name: "parent location names another event", bad: func(i int, at *eventline.Location, es []eventline.Entry) {
			if i == 3 {
				*at = es[0].Loc // event 0, not the parent 2
			}
		}, walk: 2, err: "corrupt", at: 3},
		{name: "parent location after the line", bad: func(i int, at *eventline.Location, es []eventline.Entry) {
			if i == 2 {
				at.Offset += 1000
			}
		}, walk: 3, err: "corrupt", at: 2},
		{name: "head is another event", head: func(es []eventline.Entry) eventline.Entry {
			e := es[4]
			e.ID = es[3].ID
			return e
		}, walk: 0, err: "corrupt", at: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, es := pathLines(5, tc.bad)
			m := vfs.NewMemFS()
			write(t, m, path0, b)
			head := es[4]
			if tc.head != nil {
				head = tc.head(es)
			}
			w := NewParentWalk(m, dir, head, 64<<10)
			defer w.Close()
			var got []uuid.UUID
			var err error
			for {
				var hd eventline.Header
				var pl eventline.Payload
				hd, pl, _, err = w.Next()
				if err != nil {
					break
				}
				got = append(got, hd.ID)
				if hd.ParentID == uuid.Nil {
					break
				}
				if err = w.Up(hd, pl); err != nil {
					break
				}
			}
			require.Len(t, got, tc.walk)
			for k, id := range got {
				assert.Equal(t, es[4-k].ID, id)
			}
			switch tc.err {
			case "":
				assert.NoError(t, err)
			case "noparent":
				assert.ErrorIs(t, err, ErrNoParentAt)
			default:
				corruptAt(t, err, path0, es[tc.at].Loc.Offset)
			}
		})
	}
}

// TestParentWalkReadsAhead: on a sealed chunk of small blocks, the walk
// of a long path gets most windows from its read-ahead (the blocks before
// the window, decoded while the lines are parsed) and reads every line as
// it is, in order; a chunk sealed in its plain form is read the same.
func TestParentWalkReadsAhead(t *testing.T) {
	const dir = "/c"
	const n = 3000
	b, es := pathLines(n, nil)
	for _, sealed := range []bool{true, false} {
		t.Run(fmt.Sprint("sealed ", sealed), func(t *testing.T) {
			m := vfs.NewMemFS()
			if sealed {
				require.NoError(t, m.MkdirAll(dir, 0o700))
				require.NoError(t, zchunk.WriteBlocks(m, filepath.Join(dir, layout.SealedName(0)), b, nil, 0o600, 4<<10))
			} else {
				write(t, m, filepath.Join(dir, layout.ChunkName(0)), b)
			}
			w := NewParentWalk(m, dir, es[n-1], 4<<10)
			for k := range n {
				hd, pl, loc, err := w.Next()
				require.NoError(t, err, "line %d of the walk", k)
				i := n - 1 - k
				require.Equal(t, es[i].ID, hd.ID, "line %d of the walk", k)
				assert.Equal(t, es[i].Loc, loc)
				assert.Equal(t, fmt.Sprintf(`{"n":%d}`, i), string(pl.Record))
				if i > 0 {
					require.NoError(t, w.Up(hd, pl))
				}
			}
			if sealed {
				assert.GreaterOrEqual(t, w.taken, len(b)/ReadRun-1, "windows served by the read-ahead (of about len/ReadRun)")
			} else {
				assert.Zero(t, w.taken, "a plain chunk is read directly")
			}
			w.Close()
		})
	}
}
