package sessionstore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/catalogue"
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestSubagentLineage: Create checks a subagent's lineage and derives its
// depth from its parent; a refused Create makes nothing; UpdateMeta
// cannot change the lineage.
func TestSubagentLineage(t *testing.T) {
	ctx := t.Context()
	o := deterministic(Options{fs: vfs.NewMemFS()})
	s, err := Open(memRoot, &o)
	require.NoError(t, err)
	defer s.Close()
	top, err := s.Create(ctx, Meta{Name: "top"})
	require.NoError(t, err)
	assert.Zero(t, top.Depth)
	ev, err := s.Append(ctx, top.ID, UserText("delegate"))
	require.NoError(t, err)
	child, err := s.Create(ctx, Meta{Name: "child", ParentSession: top.ID, SpawnedBy: ev.ID})
	require.NoError(t, err)
	assert.Equal(t, 1, child.Depth)
	assert.Equal(t, ev.ID, child.SpawnedBy)
	grand, err := s.Create(ctx, Meta{Name: "grandchild", ParentSession: child.ID, Depth: 2})
	require.NoError(t, err, "the right depth may be given")
	assert.Equal(t, 2, grand.Depth)
	stored, err := s.Meta(ctx, grand.ID)
	require.NoError(t, err)
	assert.Equal(t, grand, stored)

	self := uuid.MustParse("01a02f3f-a89d-7d25-b4ac-ac89a183258d")
	refused := []struct {
		name string
		meta Meta
		want error
	}{
		{"negative depth", Meta{Depth: -1}, ErrInvalidMeta},
		{"depth without parent", Meta{Depth: 1}, ErrInvalidMeta},
		{"spawned by without parent", Meta{SpawnedBy: ev.ID}, ErrInvalidMeta},
		{"own parent", Meta{ID: self, ParentSession: self}, ErrInvalidMeta},
		{"wrong depth", Meta{ParentSession: child.ID, Depth: 1}, ErrInvalidMeta},
		{"missing parent", Meta{ParentSession: self}, ErrNotFound},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Create(ctx, tt.meta)
			assert.ErrorIs(t, err, tt.want)
		})
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	assert.Len(t, list, 3, "refused creates make nothing")

	changes := map[string]func(*Meta){
		"parent":     func(m *Meta) { m.ParentSession = uuid.Nil; m.Depth = 0 },
		"depth":      func(m *Meta) { m.Depth = 5 },
		"spawned by": func(m *Meta) { m.SpawnedBy = uuid.Nil },
		"forked":     func(m *Meta) { m.ForkedFrom = &ForkPoint{Session: top.ID, Event: ev.ID} },
	}
	for name, fn := range changes {
		t.Run("update "+name, func(t *testing.T) {
			_, err := s.UpdateMeta(ctx, child.ID, fn)
			assert.ErrorIs(t, err, ErrInvalidMeta)
		})
	}
	got, err := s.UpdateMeta(ctx, child.ID, func(m *Meta) { m.Name = "renamed" })
	require.NoError(t, err, "other fields still change")
	assert.Equal(t, 1, got.Depth)
}

// listFixture makes n sessions on a fresh MemFS store: every third a
// subagent of the first, working directories and labels varied, and
// returns the store's file system and the sessions' metadata. It writes
// the session.json files as Create leaves them (without its syncs, which
// the tests here do not need) and has a writer build the catalogue from
// them; the same n gives the same sessions.
func listFixture(t *testing.T, n int) (*vfs.MemFS, []Meta) {
	t.Helper()
	m := vfs.NewMemFS()
	clock := newFakeClock()
	o := Options{fs: m, now: clock.Now, newID: clock.NewID}
	s, err := Open(memRoot, &o)
	require.NoError(t, err)
	defer s.Close()
	var metas []Meta
	for i := range n {
		id, err := clock.NewID()
		require.NoError(t, err)
		at := clock.Now()
		meta := Meta{ID: id, Name: fmt.Sprint("s", i), WorkingDir: fmt.Sprint("/w", i%2), CreatedAt: at, UpdatedAt: at,
			Labels: map[string]string{"team": []string{"a", "b", "c"}[i%3]}}
		if i%4 == 0 {
			meta.Labels["pinned"] = "yes"
		}
		if i > 0 && i%3 == 0 {
			meta.ParentSession, meta.Depth = metas[0].ID, 1
		}
		require.NoError(t, checkMeta(meta))
		b, err := encodeMeta(meta, formatVersion)
		require.NoError(t, err)
		dir := filepath.Join(memRoot, sessionsDir, id.String())
		require.NoError(t, m.MkdirAll(dir, 0o700))
		f, err := m.OpenFile(filepath.Join(dir, metaFile), os.O_RDWR|os.O_CREATE, 0o600)
		require.NoError(t, err)
		_, err = f.WriteAt(b, 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		metas = append(metas, meta)
	}
	list, err := s.List(t.Context()) // builds the catalogue
	require.NoError(t, err)
	require.Equal(t, metas, list)
	return m, metas
}

// expected is the brute-force answer: the sessions q selects, newest
// first.
func expected(metas []Meta, q Query) []Meta {
	var out []Meta
	for _, m := range slices.Backward(metas) {
		if q.Matches(m) {
			out = append(out, m)
		}
	}
	return out
}

// listModes are the ways a store answers ListPage: from the catalogue (a
// writer, a read-only store), and from every session.json (a read-only
// store without a catalogue).
var listModes = []struct {
	name string
	open func(t *testing.T, m *vfs.MemFS) *Store
}{
	{"catalogue", func(t *testing.T, m *vfs.MemFS) *Store { return openOn(t, m, false) }},
	{"read-only catalogue", func(t *testing.T, m *vfs.MemFS) *Store { return openOn(t, m, true) }},
	{"no catalogue", func(t *testing.T, m *vfs.MemFS) *Store {
		require.NoError(t, m.Remove(filepath.Join(memRoot, catalogueName)))
		return openOn(t, m, true)
	}},
}

func openOn(t *testing.T, m vfs.FS, readOnly bool) *Store {
	t.Helper()
	o := deterministic(Options{fs: m, ReadOnly: readOnly})
	s, err := Open(memRoot, &o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// walkPages gathers every page of q, failing on a duplicate.
func walkPages(t *testing.T, s *Store, q Query) (all []Meta, pages int) {
	t.Helper()
	cursor := ""
	seen := map[uuid.UUID]bool{}
	for {
		page, next, err := s.ListPage(t.Context(), q, cursor)
		require.NoError(t, err)
		pages++
		size := q.Limit
		if size == 0 {
			size = DefaultPageSize
		}
		require.LessOrEqual(t, len(page), size)
		for _, m := range page {
			require.False(t, seen[m.ID], "session %s on two pages", m.ID)
			seen[m.ID] = true
		}
		all = append(all, page...)
		if next == "" {
			return all, pages
		}
		require.Len(t, page, size, "a page before the last is full")
		cursor = next
	}
}

// TestListPageFilters: every filter, alone and together, at several page
// sizes, gives the brute-force answer in every mode.
func TestListPageFilters(t *testing.T) {
	t.Parallel()
	const n = 24
	_, metas := listFixture(t, n)
	mid := metas[n/2].CreatedAt
	queries := []struct {
		name string
		q    Query
	}{
		{"all", Query{}},
		{"parent", Query{ParentSession: metas[0].ID}},
		{"working dir", Query{WorkingDir: "/w1"}},
		{"one label", Query{Labels: map[string]string{"team": "b"}}},
		{"two labels", Query{Labels: map[string]string{"team": "a", "pinned": "yes"}}},
		{"label no session has", Query{Labels: map[string]string{"team": "z"}}},
		{"since", Query{Since: mid}},
		{"until", Query{Until: mid}},
		{"since and until", Query{Since: metas[5].CreatedAt, Until: metas[9].CreatedAt}},
		{"all filters", Query{ParentSession: metas[0].ID, WorkingDir: "/w1", Labels: map[string]string{"team": "a"}, Since: metas[1].CreatedAt}},
	}
	for _, mode := range listModes {
		t.Run(mode.name, func(t *testing.T) {
			m, _ := listFixture(t, n)
			s := mode.open(t, m)
			for _, tt := range queries {
				want := expected(metas, tt.q)
				if tt.name != "label no session has" {
					require.NotEmpty(t, want, "%s: the fixture has matches", tt.name)
				}
				for _, size := range []int{0, 1, 5} {
					if size == 1 && (mode.name == "no catalogue" || len(want) > 8) {
						continue // many pages, each reading much: the other sizes suffice
					}
					q := tt.q
					q.Limit = size
					got, _ := walkPages(t, s, q)
					assert.Equal(t, want, got, "%s, page size %d", tt.name, size)
				}
				var fromIter []Meta
				for m, err := range s.Sessions(t.Context(), tt.q) {
					require.NoError(t, err)
					fromIter = append(fromIter, m)
				}
				assert.Equal(t, want, fromIter, "%s: Sessions", tt.name)
			}
		})
	}
}

// TestListPageCursorGuarantee: sessions created, changed and updated
// between pages: every session that exists and matches throughout
// appears exactly once, newer ones do not appear.
func TestListPageCursorGuarantee(t *testing.T) {
	ctx := t.Context()
	m, metas := listFixture(t, 20)
	s := openOn(t, m, false)
	q := Query{Limit: 3}
	page, next, err := s.ListPage(ctx, q, "")
	require.NoError(t, err)
	got := slices.Clone(page)
	var added []uuid.UUID
	for next != "" {
		// Between pages: a new session, and a change to one not yet listed.
		id, err := uuid.NewV7() // the real clock: newer than the fixture's
		require.NoError(t, err)
		nm, err := s.Create(ctx, Meta{ID: id, Name: "new"})
		require.NoError(t, err)
		added = append(added, nm.ID)
		_, err = s.UpdateMeta(ctx, metas[0].ID, func(m *Meta) { m.Model = "changed" })
		require.NoError(t, err)
		page, next, err = s.ListPage(ctx, q, next)
		require.NoError(t, err)
		got = append(got, page...)
	}
	ids := map[uuid.UUID]int{}
	for _, m := range got {
		ids[m.ID]++
	}
	for _, m := range metas {
		assert.Equal(t, 1, ids[m.ID], "session %s", m.Name)
	}
	for _, id := range added {
		assert.Zero(t, ids[id], "created after the walk began")
	}
	assert.Len(t, got, len(metas))
	assert.Equal(t, "changed", got[len(got)-1].Model, "the oldest, read after its change")
}

// TestSessionsEarlyStop: breaking out of Sessions stops the reading: a
// walk of all opens the catalogue once per batch, a stop after three
// sessions opens it once.
func TestSessionsEarlyStop(t *testing.T) {
	t.Parallel()
	m, _ := listFixture(t, 2*sessionsBatch+1)
	s := openOn(t, m, true)
	opens := 0
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpOpen && filepath.Base(path) == catalogueName {
			opens++
		}
		return nil
	})
	n := 0
	for _, err := range s.Sessions(t.Context(), Query{}) {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, 2*sessionsBatch+1, n)
	assert.Equal(t, 3, opens, "one page read per batch")
	opens, n = 0, 0
	for _, err := range s.Sessions(t.Context(), Query{}) {
		require.NoError(t, err)
		if n++; n == 3 {
			break
		}
	}
	assert.Equal(t, 1, opens, "stopped after the first batch")
	opens, n = 0, 0
	for _, err := range s.Sessions(t.Context(), Query{Limit: 5}) {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, 5, n)
	assert.Equal(t, 1, opens)
}

// TestListPageErrors: a negative limit or a cursor ListPage did not
// return is ErrInvalidQuery; an unreadable session is reported beside
// the page, not hiding it, and takes its place for the cursor.
func TestListPageErrors(t *testing.T) {
	ctx := t.Context()
	m, metas := listFixture(t, 6)
	s := openOn(t, m, false)
	_, _, err := s.ListPage(ctx, Query{Limit: -1}, "")
	assert.ErrorIs(t, err, ErrInvalidQuery)
	for _, c := range []string{"x", "01A02F3F-A89D-7D25-B4AC-AC89A183258D", "{01a02f3f-a89d-7d25-b4ac-ac89a183258d}"} {
		_, _, err = s.ListPage(ctx, Query{}, c)
		assert.ErrorIs(t, err, ErrInvalidQuery, c)
	}
	for _, err := range s.Sessions(ctx, Query{Limit: -1}) {
		assert.ErrorIs(t, err, ErrInvalidQuery)
	}

	bad := metas[3]
	path := filepath.Join(memRoot, sessionsDir, bad.ID.String(), metaFile)
	f, err := m.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("X"), 10)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	// A session.json changed in place by hand is seen once the sessions
	// directory changes too (ListPage's promise).
	touchSessionsDir(t, m)
	want := expected(slices.Delete(slices.Clone(metas), 3, 4), Query{})
	var got []Meta
	var unreadable []uuid.UUID
	cursor := ""
	for {
		page, next, err := s.ListPage(ctx, Query{Limit: 2}, cursor)
		if err != nil {
			var le *ListError
			require.ErrorAs(t, err, &le)
			for _, u := range le.Unreadable {
				unreadable = append(unreadable, u.ID)
				assert.Equal(t, path, u.Path)
				assert.ErrorIs(t, u.Err, ErrCorrupt)
			}
		}
		got = append(got, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	assert.Equal(t, want, got)
	assert.Equal(t, []uuid.UUID{bad.ID}, unreadable, "reported once")

	var fromIter []Meta
	var iterBad []uuid.UUID
	for m, err := range s.Sessions(ctx, Query{}) {
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			iterBad = append(iterBad, m.ID)
			continue
		}
		fromIter = append(fromIter, m)
	}
	assert.Equal(t, want, fromIter)
	assert.Equal(t, []uuid.UUID{bad.ID}, iterBad)
}

// TestListPageRemote: with a Remote, ListPage answers from the object
// store's metadata, filters and pages included.
func TestListPageRemote(t *testing.T) {
	ctx := t.Context()
	obj := newMemObjects()
	s, err := Open(t.TempDir(), remoteOpts(obj))
	require.NoError(t, err)
	defer s.Close()
	var metas []Meta
	for i := range 7 {
		meta := Meta{Name: fmt.Sprint("r", i), WorkingDir: fmt.Sprint("/w", i%2)}
		if i > 0 {
			meta.ParentSession = metas[0].ID
		}
		got, err := s.Create(ctx, meta)
		require.NoError(t, err)
		metas = append(metas, got)
	}
	other, err := Open(t.TempDir(), remoteOpts(obj)) // another machine: an empty cache
	require.NoError(t, err)
	defer other.Close()
	for _, q := range []Query{{Limit: 2}, {Limit: 3, WorkingDir: "/w1"}, {ParentSession: metas[0].ID}} {
		got, _ := walkPages(t, other, q)
		assert.Equal(t, expected(metas, q), got, "%+v", q)
	}
}

// TestListCarriesLineage: the catalogue holds each session's lineage, so
// a List answered from it (and ListRecent, ListPage) returns it as
// session.json has it.
func TestListCarriesLineage(t *testing.T) {
	ctx := t.Context()
	m := vfs.NewMemFS()
	s := openOn(t, m, false)
	top, err := s.Create(ctx, Meta{Name: "top"})
	require.NoError(t, err)
	ev, err := s.Append(ctx, top.ID, UserText("spawn"))
	require.NoError(t, err)
	sub, err := s.Create(ctx, Meta{Name: "sub", ParentSession: top.ID, SpawnedBy: ev.ID})
	require.NoError(t, err)
	fork, err := s.Create(ctx, Meta{Name: "fork", ForkedFrom: &ForkPoint{Session: top.ID, Event: ev.ID}})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	r := openOn(t, m, true)
	top, err = r.Meta(ctx, top.ID) // the append moved UpdatedAt
	require.NoError(t, err)
	want := []Meta{top, sub, fork}
	opens := 0
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpOpen && filepath.Base(path) == metaFile {
			opens++
		}
		return nil
	})
	list, err := r.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, list)
	assert.Zero(t, opens, "answered from the catalogue")
	recent, err := r.ListRecent(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, expected(want, Query{}), recent)
	page, _, err := r.ListPage(ctx, Query{ParentSession: top.ID}, "")
	require.NoError(t, err)
	assert.Equal(t, []Meta{sub}, page)
	assert.Zero(t, opens)
}

// TestCatalogueFormat1Rebuilt: a catalogue an older build wrote (format
// 1: no lineage members) is not trusted: List returns the lineage from
// session.json, and a writer rewrites the catalogue in format 2.
func TestCatalogueFormat1Rebuilt(t *testing.T) {
	ctx := t.Context()
	m := vfs.NewMemFS()
	s := openOn(t, m, false)
	top, err := s.Create(ctx, Meta{Name: "top"})
	require.NoError(t, err)
	sub, err := s.Create(ctx, Meta{Name: "sub", ParentSession: top.ID})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	// Rewrite both files as format 1: header v 1, entries without lineage.
	for _, name := range []string{catalogueName, catalogueLogName} {
		path := filepath.Join(memRoot, name)
		b, err := vfs.ReadFile(m, path)
		require.NoError(t, err)
		var out []byte
		catalogue.Lines(b, func(line []byte) bool {
			r, err := catalogue.DecodeRecord(line)
			require.NoError(t, err)
			r.Meta.ParentSession, r.Meta.Depth = uuid.Nil, 0
			l := catalogue.AppendRecord(nil, r)
			body := l[:len(l)-len(`,"crc":"xxxxxxxx"}`)-1]
			body = bytes.Replace(body, []byte(`"v":2,`), []byte(`"v":1,`), 1)
			out = jsonl.Seal(out, append(slices.Clone(body), '}'))
			return true
		})
		require.NotEqual(t, b, out)
		w, err := m.OpenFile(path, os.O_RDWR|os.O_TRUNC, 0)
		require.NoError(t, err)
		_, err = w.WriteAt(out, 0)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
	want := []Meta{top, sub}
	for _, readOnly := range []bool{true, false} {
		r := openOn(t, m, readOnly)
		list, err := r.List(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, list, "read-only %v", readOnly)
		page, _, err := r.ListPage(ctx, Query{ParentSession: top.ID}, "")
		require.NoError(t, err)
		assert.Equal(t, []Meta{sub}, page, "read-only %v", readOnly)
	}
	st, err := catalogue.Load(m, memRoot)
	require.NoError(t, err, "the writer rewrote it in this build's format")
	entry, ok, _ := st.Lookup(sub.ID, -1)
	require.True(t, ok)
	assert.Equal(t, top.ID, entry.Meta.ParentSession)
	assert.Equal(t, 1, entry.Meta.Depth)
}

// TestListPageSeek: on a snapshot of many blocks, a page from a cursor
// starts at the cursor's place, found by binary search (it decodes about
// a span's worth of entries, not the entries after the cursor), and
// returns the right sessions from anywhere in the snapshot.
func TestListPageSeek(t *testing.T) {
	t.Parallel()
	const n = 700 // a snapshot of some 180 KiB, a few times the span of the catalogue's search (catSeek)
	m, metas := listFixture(t, n)
	s := openOn(t, m, true)
	info, err := m.Stat(filepath.Join(memRoot, catalogueName))
	require.NoError(t, err)
	require.Greater(t, info.Size(), int64(2*64<<10), "the snapshot spans several search steps")
	newest := expected(metas, Query{})
	line := float64(info.Size()) / float64(n+1)
	for _, at := range []int{1, 2, n / 3, n / 2, n - 60, n - 2, n - 1} {
		cursor := newest[at-1].ID.String()
		page, next, err := s.ListPage(t.Context(), Query{Limit: 50}, cursor)
		require.NoError(t, err)
		want := newest[at:min(at+50, n)]
		assert.Equal(t, want, page, "after position %d", at)
		assert.Equal(t, at+50 < n, next != "", "after position %d", at)

		before, err := parseCursor(cursor)
		require.NoError(t, err)
		_, _, cost, err := s.listPage(t.Context(), Query{}, before, 50)
		require.NoError(t, err)
		// At most the lines of one span (of lines of about the same
		// length) and the page's; reading from the end would decode
		// every line after the cursor too.
		bound := 51 + int(float64(64<<10)/(0.9*line)) + 2
		assert.Less(t, cost.entries, bound, "after position %d: decoded %d entries", at, cost.entries)
	}
	// A cursor between two sessions' ids (one of a session removed since).
	gone := newest[n/2]
	require.NoError(t, removeAllMem(m, filepath.Join(memRoot, sessionsDir, gone.ID.String())))
	w := openOn(t, m, false) // a writer, which notices the change and rewrites the catalogue
	page, _, err := w.ListPage(t.Context(), Query{Limit: 3}, gone.ID.String())
	require.NoError(t, err)
	assert.Equal(t, newest[n/2+1:n/2+4], page)
}

// removeAllMem removes dir and what it holds from m.
func removeAllMem(m vfs.FS, dir string) error {
	names, err := m.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		p := filepath.Join(dir, name)
		if info, err := m.Stat(p); err == nil && info.IsDir() {
			if err := removeAllMem(m, p); err != nil {
				return err
			}
			continue
		}
		if err := m.Remove(p); err != nil {
			return err
		}
	}
	return m.Remove(dir)
}

// TestListPageRemoteReadsItsPage: with a Remote, a page reads the
// metadata copies of its own sessions (and of those its query rejects on
// the way), not one per session of the store; a damaged copy is reported
// beside the page; a walk returns every session once.
func TestListPageRemoteReadsItsPage(t *testing.T) {
	ctx := t.Context()
	obj := newMemObjects()
	s, err := Open(t.TempDir(), remoteOpts(obj))
	require.NoError(t, err)
	defer s.Close()
	var metas []Meta
	for i := range 80 {
		got, err := s.Create(ctx, Meta{Name: fmt.Sprint("r", i), WorkingDir: fmt.Sprint("/w", i%4)})
		require.NoError(t, err)
		metas = append(metas, got)
	}
	other, err := Open(t.TempDir(), remoteOpts(obj))
	require.NoError(t, err)
	defer other.Close()
	for _, q := range []Query{{Limit: 5}, {Limit: 5, WorkingDir: "/w3"}} {
		gets := obj.count("get")
		page, next, err := other.ListPage(ctx, q, "")
		require.NoError(t, err)
		require.Len(t, page, 5)
		assert.NotEmpty(t, next)
		assert.LessOrEqual(t, obj.count("get")-gets, 32, "%+v: the reads of about a page, not of 80 sessions", q)
		got, _ := walkPages(t, other, q)
		assert.Equal(t, expected(metas, q), got, "%+v", q)
	}

	// A damaged copy: reported beside the page, in its place.
	bad := metas[78].ID
	keys := obj.keys(metaPrefix + bad.String() + "/")
	require.Len(t, keys, 1)
	require.NoError(t, obj.Put(ctx, keys[0], []byte("{not json")))
	page, _, err := other.ListPage(ctx, Query{Limit: 3}, "")
	var le *ListError
	require.ErrorAs(t, err, &le)
	require.Len(t, le.Unreadable, 1)
	assert.Equal(t, bad, le.Unreadable[0].ID)
	assert.Equal(t, keys[0], le.Unreadable[0].Path)
	require.Len(t, page, 3)
	assert.Equal(t, []uuid.UUID{metas[79].ID, metas[77].ID, metas[76].ID}, []uuid.UUID{page[0].ID, page[1].ID, page[2].ID})
}
