package sessionstore

import (
	"context"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// laneTips returns the session's lanes as name -> tip, and the active
// lane's name.
func laneTips(t *testing.T, s *Store, id uuid.UUID) (map[string]uuid.UUID, string) {
	t.Helper()
	ls, err := s.Lanes(context.Background(), id)
	require.NoError(t, err)
	out := map[string]uuid.UUID{}
	active := ""
	for _, l := range ls {
		out[l.Name] = l.Tip
		if l.Active {
			require.Empty(t, active, "one active lane")
			active = l.Name
		}
	}
	return out, active
}

func TestLanesImplicitMain(t *testing.T) {
	ctx := context.Background()
	o := deterministic(Options{})
	m, s, id := memSession(t, o)
	ls, err := s.Lanes(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []Lane{{Name: DefaultLane, Active: true}}, ls, "an empty session has the implicit lane, with no tip")
	evs := appendN(t, s, id, 3)
	tips, active := laneTips(t, s, id)
	assert.Equal(t, map[string]uuid.UUID{DefaultLane: evs[2].ID}, tips)
	assert.Equal(t, DefaultLane, active)
	a, err := s.ActiveLane(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, Lane{Name: DefaultLane, Tip: evs[2].ID, Active: true, SetAt: evs[2].Time}, a)
	// Reading lanes writes nothing; switching to the implicit lane neither.
	require.NoError(t, s.SwitchLane(ctx, id, DefaultLane))
	_, err = m.Stat(sessionPath(id, lanesFile))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestLaneAPIErrors(t *testing.T) {
	ctx := context.Background()
	_, s, id := memSession(t, deterministic(Options{}))
	evs := appendN(t, s, id, 3)
	require.NoError(t, s.CreateLane(ctx, id, "side", evs[0].ID))
	missing := uuid.Must(uuid.NewV7())
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"create empty name", func() error { return s.CreateLane(ctx, id, "", evs[0].ID) }, ErrInvalidLane},
		{"create long name", func() error { return s.CreateLane(ctx, id, strings.Repeat("a", MaxLaneName+1), evs[0].ID) }, ErrInvalidLane},
		{"create bad utf-8", func() error { return s.CreateLane(ctx, id, "a\xffb", evs[0].ID) }, ErrInvalidLane},
		{"create control char", func() error { return s.CreateLane(ctx, id, "a\nb", evs[0].ID) }, ErrInvalidLane},
		{"create duplicate", func() error { return s.CreateLane(ctx, id, "side", evs[1].ID) }, ErrExists},
		{"create duplicate implicit", func() error { return s.CreateLane(ctx, id, DefaultLane, evs[1].ID) }, ErrExists},
		{"create unknown event", func() error { return s.CreateLane(ctx, id, "x", missing) }, ErrNotFound},
		{"create nil event", func() error { return s.CreateLane(ctx, id, "x", uuid.Nil) }, ErrNotFound},
		{"create unknown session", func() error { return s.CreateLane(ctx, missing, "x", evs[0].ID) }, ErrNotFound},
		{"move unknown lane", func() error { return s.MoveLane(ctx, id, "nope", evs[0].ID) }, ErrNotFound},
		{"move unknown event", func() error { return s.MoveLane(ctx, id, "side", missing) }, ErrNotFound},
		{"move bad name", func() error { return s.MoveLane(ctx, id, "", evs[0].ID) }, ErrInvalidLane},
		{"delete active", func() error { return s.DeleteLane(ctx, id, DefaultLane) }, ErrActiveLane},
		{"delete unknown", func() error { return s.DeleteLane(ctx, id, "nope") }, ErrNotFound},
		{"switch unknown", func() error { return s.SwitchLane(ctx, id, "nope") }, ErrNotFound},
		{"switch bad name", func() error { return s.SwitchLane(ctx, id, "\x00") }, ErrInvalidLane},
	}
	before, active := laneTips(t, s, id)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorIs(t, tt.call(), tt.want)
			after, a := laneTips(t, s, id)
			assert.Equal(t, before, after, "a refused call changes no lane")
			assert.Equal(t, active, a)
		})
	}
	// Unicode names are fine.
	require.NoError(t, s.CreateLane(ctx, id, "ветка-β", evs[1].ID))
	require.NoError(t, s.CreateLane(ctx, id, strings.Repeat("é", MaxLaneName/2), evs[1].ID))
}

func TestLaneSwitchAppendsToTheLaneAndSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	o := deterministic(Options{})
	m, s, id := memSession(t, o)
	evs := appendN(t, s, id, 3)
	require.NoError(t, s.CreateLane(ctx, id, "alt", evs[0].ID))
	require.NoError(t, s.SwitchLane(ctx, id, "alt"))

	parent, branching, err := s.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, evs[0].ID, parent)
	assert.True(t, branching)
	head, err := s.Head(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, evs[2].ID, head, "a switch does not move HEAD")

	// Restart before any append: alt is still active, the next append
	// still goes onto its tip.
	require.NoError(t, s.Close())
	s = openMem(t, m, o)
	tips, active := laneTips(t, s, id)
	assert.Equal(t, "alt", active)
	assert.Equal(t, map[string]uuid.UUID{DefaultLane: evs[2].ID, "alt": evs[0].ID}, tips)
	e := apiAppend(t, s, id, UserText("on alt"))
	assert.Equal(t, evs[0].ID, e.ParentID)
	assert.Equal(t, evs[0].ID, e.BranchFrom)
	e2 := apiAppend(t, s, id, UserText("on alt again"))
	assert.Equal(t, e.ID, e2.ParentID)
	assert.Equal(t, uuid.Nil, e2.BranchFrom)
	tips, _ = laneTips(t, s, id)
	assert.Equal(t, e2.ID, tips["alt"], "appends move the active lane")
	assert.Equal(t, evs[2].ID, tips[DefaultLane])

	// Restart after appends: alt's tip is HEAD, main's kept.
	require.NoError(t, s.Close())
	s = openMem(t, m, o)
	tips, active = laneTips(t, s, id)
	assert.Equal(t, "alt", active)
	assert.Equal(t, map[string]uuid.UUID{DefaultLane: evs[2].ID, "alt": e2.ID}, tips)
	parent, branching, err = s.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, e2.ID, parent)
	assert.False(t, branching)

	// Back to main: the next append continues main.
	require.NoError(t, s.SwitchLane(ctx, id, DefaultLane))
	e3 := apiAppend(t, s, id, UserText("on main"))
	assert.Equal(t, evs[2].ID, e3.ParentID)
	require.NoError(t, s.Close())
	s = openMem(t, m, o)
	tips, active = laneTips(t, s, id)
	assert.Equal(t, DefaultLane, active)
	assert.Equal(t, map[string]uuid.UUID{DefaultLane: e3.ID, "alt": e2.ID}, tips)
	r, err := s.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
	require.NoError(t, s.Close())
}

func TestLaneMoveAndDelete(t *testing.T) {
	ctx := context.Background()
	o := deterministic(Options{})
	m, s, id := memSession(t, o)
	evs := appendN(t, s, id, 4)
	require.NoError(t, s.CreateLane(ctx, id, "b", evs[1].ID))
	require.NoError(t, s.CreateLane(ctx, id, "c", evs[2].ID))
	require.NoError(t, s.MoveLane(ctx, id, "b", evs[0].ID))
	// Moving an inactive lane leaves the next parent alone.
	parent, branching, err := s.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, evs[3].ID, parent)
	assert.False(t, branching)
	// Moving the active lane makes its new tip the next parent.
	require.NoError(t, s.MoveLane(ctx, id, DefaultLane, evs[1].ID))
	parent, branching, err = s.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, evs[1].ID, parent)
	assert.True(t, branching)
	// Moving it back to HEAD cancels that.
	require.NoError(t, s.MoveLane(ctx, id, DefaultLane, evs[3].ID))
	parent, branching, err = s.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, evs[3].ID, parent)
	assert.False(t, branching)
	require.NoError(t, s.DeleteLane(ctx, id, "c"))
	require.NoError(t, s.Close())

	s = openMem(t, m, o)
	tips, active := laneTips(t, s, id)
	assert.Equal(t, DefaultLane, active)
	assert.Equal(t, map[string]uuid.UUID{DefaultLane: evs[3].ID, "b": evs[0].ID}, tips)
	// The events of a deleted lane stay.
	_, err = s.Event(ctx, id, evs[2].ID)
	assert.NoError(t, err)
	require.NoError(t, s.Close())
}

// A Branch selection stays an in-memory selection: changes to other lanes
// keep it, and the append it chooses moves the active lane.
func TestLaneBranchInterplay(t *testing.T) {
	ctx := context.Background()
	_, s, id := memSession(t, deterministic(Options{}))
	evs := appendN(t, s, id, 3)
	require.NoError(t, s.Branch(ctx, id, evs[0].ID))
	require.NoError(t, s.CreateLane(ctx, id, "x", evs[1].ID))
	parent, _, err := s.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, evs[0].ID, parent, "creating a lane keeps the Branch selection")
	e := apiAppend(t, s, id, UserText("branched"))
	assert.Equal(t, evs[0].ID, e.ParentID)
	a, err := s.ActiveLane(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, e.ID, a.Tip)
	// A switch replaces a Branch selection.
	require.NoError(t, s.Branch(ctx, id, evs[0].ID))
	require.NoError(t, s.SwitchLane(ctx, id, "x"))
	parent, _, err = s.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, evs[1].ID, parent)
	require.NoError(t, s.Close())
}

// The lanes survive eviction (MaxOpenSessions) as they survive Close.
func TestLanesSurviveEviction(t *testing.T) {
	ctx := context.Background()
	o := deterministic(Options{MaxOpenSessions: 1})
	m, s, id := memSession(t, o)
	evs := appendN(t, s, id, 2)
	require.NoError(t, s.CreateLane(ctx, id, "alt", evs[0].ID))
	require.NoError(t, s.SwitchLane(ctx, id, "alt"))
	other, err := s.Create(ctx, Meta{Name: "other"})
	require.NoError(t, err)
	appendN(t, s, other.ID, 1) // evicts id
	e := apiAppend(t, s, id, UserText("after eviction"))
	assert.Equal(t, evs[0].ID, e.ParentID)
	require.NoError(t, s.Close())
	s = openMem(t, m, o)
	_, active := laneTips(t, s, id)
	assert.Equal(t, "alt", active)
	require.NoError(t, s.Close())
}

func TestLanesReadOnlyStore(t *testing.T) {
	ctx := context.Background()
	o := deterministic(Options{})
	m, s, id := memSession(t, o)
	evs := appendN(t, s, id, 2)
	require.NoError(t, s.CreateLane(ctx, id, "alt", evs[0].ID))
	require.NoError(t, s.SwitchLane(ctx, id, "alt"))
	r := openMem(t, m, Options{ReadOnly: true})
	tips, active := laneTips(t, r, id)
	assert.Equal(t, "alt", active)
	assert.Equal(t, map[string]uuid.UUID{DefaultLane: evs[1].ID, "alt": evs[0].ID}, tips)
	assert.ErrorIs(t, r.CreateLane(ctx, id, "y", evs[0].ID), ErrReadOnly)
	assert.ErrorIs(t, r.SwitchLane(ctx, id, DefaultLane), ErrReadOnly)
	// The reader sees the writer's next change.
	require.NoError(t, s.MoveLane(ctx, id, DefaultLane, evs[0].ID))
	tips, _ = laneTips(t, r, id)
	assert.Equal(t, evs[0].ID, tips[DefaultLane])
	require.NoError(t, r.Close())
	require.NoError(t, s.Close())
}

// A damaged lanes file: every lane call reports a *CorruptionError naming
// it, the session's events stay readable and appendable, and nothing
// rewrites the file.
func TestLanesDamagedFile(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		corrupt func(b []byte) []byte
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"no newline", func(b []byte) []byte { return b[:len(b)-1] }},
		{"flipped byte", func(b []byte) []byte { c := append([]byte(nil), b...); c[10] ^= 1; return c }},
		{"empty", func(b []byte) []byte { return []byte{} }},
		{"unknown event", func(b []byte) []byte {
			ls, err := decodeLanes(b, "x")
			if err != nil {
				panic(err)
			}
			ls.lanes["ghost"] = laneTip{tip: uuid.Must(uuid.NewV7())}
			out, err := encodeLanes(ls)
			if err != nil {
				panic(err)
			}
			return out
		}},
		{"active not a lane", func(b []byte) []byte {
			ls, err := decodeLanes(b, "x")
			if err != nil {
				panic(err)
			}
			ls.active = "gone"
			out, err := encodeLanes(ls)
			if err != nil {
				panic(err)
			}
			return out
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := deterministic(Options{})
			m, s, id := memSession(t, o)
			evs := appendN(t, s, id, 2)
			require.NoError(t, s.CreateLane(ctx, id, "alt", evs[0].ID))
			require.NoError(t, s.Close())
			path := sessionPath(id, lanesFile)
			b, err := vfs.ReadFile(m, path)
			require.NoError(t, err)
			bad := tt.corrupt(b)
			writeMemFile(t, m, path, bad)

			s = openMem(t, m, o)
			r, err := s.Verify(ctx, id)
			require.NoError(t, err)
			require.Len(t, r.Problems, 1, "Verify reports the damage")
			assert.Equal(t, path, r.Problems[0].Path)
			_, err = s.Lanes(ctx, id)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, path, ce.Path)
			assert.ErrorIs(t, err, ErrCorrupt)
			assert.ErrorAs(t, s.SwitchLane(ctx, id, "alt"), &ce)
			assert.ErrorAs(t, s.CreateLane(ctx, id, "new", evs[1].ID), &ce)
			e := apiAppend(t, s, id, UserText("still appendable"))
			assert.Equal(t, evs[1].ID, e.ParentID, "appends go onto HEAD")
			got, err := s.Load(ctx, id)
			require.NoError(t, err)
			assert.Len(t, got, 3)
			require.NoError(t, s.Close())
			after, err := vfs.ReadFile(m, path)
			require.NoError(t, err)
			assert.Equal(t, bad, after, "the damaged file is left as it is")
		})
	}
}

func TestLanesFileFormat(t *testing.T) {
	a, b := uuid.MustParse("0198e2a4-0000-7000-8000-000000000001"), uuid.MustParse("0198e2a4-0000-7000-8000-000000000002")
	ls := &laneSet{active: "z", head: b, lanes: map[string]laneTip{"z": {tip: b}, "a": {tip: a}}}
	got, err := encodeLanes(ls)
	require.NoError(t, err)
	want := `{"v":1,"active":"z","head":"0198e2a4-0000-7000-8000-000000000002","lanes":[` +
		`{"name":"a","tip":"0198e2a4-0000-7000-8000-000000000001","set":"0001-01-01T00:00:00Z"},` +
		`{"name":"z","tip":"0198e2a4-0000-7000-8000-000000000002","set":"0001-01-01T00:00:00Z"}]`
	require.True(t, strings.HasPrefix(string(got), want), "%s", got)
	back, err := decodeLanes(got, "p")
	require.NoError(t, err)
	assert.Equal(t, ls, back)
	// A future version is refused as such, not as corruption.
	body := strings.Replace(string(got[:len(got)-jsonl.SuffixLen-1]), `"v":1`, `"v":2`, 1) + "}"
	_, err = decodeLanes(jsonl.Seal(nil, []byte(body)), "p")
	assert.ErrorIs(t, err, ErrUnsupportedFormat)
	assert.NotErrorIs(t, err, ErrCorrupt)
}

// Lane calls beside concurrent appends: each lane change settles the
// appends in flight first, so no lane names an event that is not durable;
// the lanes survive a restart and the session verifies clean (and, under
// -race, nothing races).
func TestLanesBesideConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	o := Options{}
	m, s, id := memSession(t, o)
	evs := appendN(t, s, id, 2)
	require.NoError(t, s.CreateLane(ctx, id, "alt", evs[0].ID))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				_, err := s.Append(ctx, id, UserText("concurrent"))
				assert.NoError(t, err)
			}
		})
	}
	wg.Go(func() {
		for i := range 20 {
			assert.NoError(t, s.SwitchLane(ctx, id, []string{"alt", DefaultLane}[i%2]))
			head, err := s.Head(ctx, id)
			assert.NoError(t, err)
			assert.NoError(t, s.MoveLane(ctx, id, "alt", head))
		}
	})
	wg.Wait()
	tips, _ := laneTips(t, s, id)
	require.NoError(t, s.Close())
	s = openMem(t, m, o)
	after, _ := laneTips(t, s, id)
	assert.Equal(t, tips, after, "the lanes survive the restart")
	for name, tip := range after {
		_, err := s.Event(ctx, id, tip)
		assert.NoError(t, err, "lane %q", name)
	}
	r, err := s.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
	require.NoError(t, s.Close())
}
