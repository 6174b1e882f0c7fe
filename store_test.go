package sessionstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Shared helpers of the API tests (store_test.go, session_test.go,
// event_test.go, lock_test.go). They are prefixed with "api".

// apiOpen opens the store at dir and closes it when the test ends. Closing
// twice is allowed, so a test may also close it itself.
func apiOpen(t *testing.T, dir string, opts *Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

// apiNewStore opens a store in a new temporary directory.
func apiNewStore(t *testing.T, opts *Options) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	return apiOpen(t, dir, opts), dir
}

// apiNewSession creates a session with a generated id.
func apiNewSession(t *testing.T, s *Store) uuid.UUID {
	t.Helper()
	m, err := s.Create(context.Background(), Meta{Name: "test session"})
	require.NoError(t, err)
	return m.ID
}

// apiAppend appends ev and requires success.
func apiAppend(t *testing.T, s *Store, session uuid.UUID, ev Event) Event {
	t.Helper()
	out, err := s.Append(context.Background(), session, ev)
	require.NoError(t, err)
	return out
}

// apiSessionDir is the directory of a session in the store rooted at dir.
func apiSessionDir(dir string, session uuid.UUID) string {
	return filepath.Join(dir, "sessions", session.String())
}

// apiFiles returns every file and directory under dir, keyed by
// slash-separated relative path: a file as its size and the SHA-256 of its
// content, a directory as "dir". Equal snapshots mean nothing changed.
func apiFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[filepath.ToSlash(rel)] = "dir"
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[filepath.ToSlash(rel)] = fmt.Sprintf("%d bytes, sha256 %s", len(b), hex.EncodeToString(sum[:]))
		return nil
	})
	require.NoError(t, err)
	return out
}

// apiTree returns the session's tree and requires success.
func apiTree(t *testing.T, s *Store, session uuid.UUID) []Node {
	t.Helper()
	nodes, err := s.Tree(context.Background(), session)
	require.NoError(t, err)
	return nodes
}

// apiLoad returns the full path from the root to HEAD and requires success.
func apiLoad(t *testing.T, s *Store, session uuid.UUID) []Event {
	t.Helper()
	// The full path: some of these tests append compaction events by
	// hand, which Load would start the context at.
	evs, err := s.FullPath(context.Background(), session, uuid.Nil)
	require.NoError(t, err)
	return evs
}

// apiHead returns the session's HEAD and requires success.
func apiHead(t *testing.T, s *Store, session uuid.UUID) uuid.UUID {
	t.Helper()
	head, err := s.Head(context.Background(), session)
	require.NoError(t, err)
	return head
}

// apiIDs returns the ids of events.
func apiIDs(evs []Event) []uuid.UUID {
	out := make([]uuid.UUID, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// apiNodeIDs returns the ids of nodes.
func apiNodeIDs(nodes []Node) []uuid.UUID {
	out := make([]uuid.UUID, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

// apiSameEvent asserts that got is want as stored: same ids, kind, role,
// instant and record bytes.
func apiSameEvent(t *testing.T, want, got Event) bool {
	t.Helper()
	ok := assert.Equal(t, want.ID, got.ID, "ID")
	ok = assert.Equal(t, want.ParentID, got.ParentID, "ParentID of %s", want.ID) && ok
	ok = assert.Equal(t, want.BranchFrom, got.BranchFrom, "BranchFrom of %s", want.ID) && ok
	ok = assert.Equal(t, want.Kind, got.Kind, "Kind of %s", want.ID) && ok
	ok = assert.Equal(t, want.Role, got.Role, "Role of %s", want.ID) && ok
	ok = assert.True(t, want.Time.Equal(got.Time), "Time of %s: want %v, got %v", want.ID, want.Time, got.Time) && ok
	ok = assert.Equal(t, string(want.Record), string(got.Record), "Record of %s", want.ID) && ok
	return ok
}

// apiSameEvents asserts that got is want, event by event.
func apiSameEvents(t *testing.T, want, got []Event) {
	t.Helper()
	require.Equal(t, apiIDs(want), apiIDs(got))
	for i := range want {
		apiSameEvent(t, want[i], got[i])
	}
}

// apiSameNodes asserts that two trees are equal (times compared as instants).
func apiSameNodes(t *testing.T, want, got []Node) {
	t.Helper()
	require.Equal(t, apiNodeIDs(want), apiNodeIDs(got))
	for i := range want {
		w, g := want[i], got[i]
		assert.True(t, w.Time.Equal(g.Time), "Time of %s", w.ID)
		w.Time, g.Time = time.Time{}, time.Time{}
		assert.Equal(t, w, g)
	}
}

// apiCompact returns the compact form of a JSON text.
func apiCompact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, json.Compact(&b, []byte(s)))
	return b.String()
}

// apiChunkLines reads every chunk file of a session and returns, per chunk
// file name, the ids of the records it holds, in order.
func apiChunkLines(t *testing.T, sessionDir string) (names []string, ids map[string][]uuid.UUID) {
	t.Helper()
	chunkDir := filepath.Join(sessionDir, "chunks")
	entries, err := os.ReadDir(chunkDir)
	require.NoError(t, err)
	ids = map[string][]uuid.UUID{}
	for _, e := range entries {
		names = append(names, e.Name())
		data, err := os.ReadFile(filepath.Join(chunkDir, e.Name()))
		require.NoError(t, err)
		// The active chunk may end in free space: zero bytes.
		r := bufio.NewReader(bytes.NewReader(bytes.TrimRight(data, "\x00")))
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				require.Equal(t, byte('\n'), line[len(line)-1], "chunk %s ends without a newline", e.Name())
				var rec struct {
					ID uuid.UUID `json:"id"`
				}
				require.NoError(t, json.Unmarshal(line, &rec), "chunk %s line %q", e.Name(), line)
				ids[e.Name()] = append(ids[e.Name()], rec.ID)
			}
			if err != nil {
				break
			}
		}
	}
	return names, ids
}

func TestAPIAppendChain(t *testing.T) {
	ctx := t.Context()
	s, dir := apiNewStore(t, nil)
	id := apiNewSession(t, s)

	head := apiHead(t, s, id)
	assert.Equal(t, uuid.Nil, head, "an empty session has no HEAD")
	parent, branching, err := s.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, uuid.Nil, parent)
	assert.False(t, branching)

	var appended []Event
	for i := range 6 {
		ev := apiAppend(t, s, id, UserText(fmt.Sprintf("message %d", i)))
		assert.Equal(t, uuid.Version(7), ev.ID.Version(), "event ids are UUIDv7")
		assert.Equal(t, uuid.RFC4122, ev.ID.Variant())
		if i == 0 {
			assert.Equal(t, uuid.Nil, ev.ParentID, "the first event is a root")
		} else {
			prev := appended[i-1]
			assert.Equal(t, prev.ID, ev.ParentID, "event %d is a child of the previous one", i)
			assert.Negative(t, bytes.Compare(prev.ID[:], ev.ID[:]), "ids increase")
			assert.False(t, ev.Time.Before(prev.Time), "times do not go backwards")
		}
		assert.Equal(t, uuid.Nil, ev.BranchFrom)
		assert.Equal(t, KindMessage, ev.Kind)
		assert.Equal(t, RoleUser, ev.Role)
		assert.False(t, ev.Time.IsZero(), "Time is assigned")
		assert.Equal(t, time.UTC, ev.Time.Location(), "Time is UTC")
		assert.WithinDuration(t, time.Now(), ev.Time, time.Minute)
		assert.JSONEq(t, fmt.Sprintf(`{"content":"message %d"}`, i), string(ev.Record))

		assert.Equal(t, ev.ID, apiHead(t, s, id), "HEAD follows Append")
		parent, branching, err := s.NextParent(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, ev.ID, parent)
		assert.False(t, branching)
		appended = append(appended, ev)
	}

	apiSameEvents(t, appended, apiLoad(t, s, id))
	nodes := apiTree(t, s, id)
	assert.Equal(t, apiIDs(appended), apiNodeIDs(nodes))

	// The chain survives a reopen, and HEAD with it.
	require.NoError(t, s.Close())
	s2 := apiOpen(t, dir, nil)
	assert.Equal(t, appended[len(appended)-1].ID, apiHead(t, s2, id))
	apiSameEvents(t, appended, apiLoad(t, s2, id))
	next := apiAppend(t, s2, id, UserText("after reopen"))
	assert.Equal(t, appended[len(appended)-1].ID, next.ParentID)
	assert.Negative(t, bytes.Compare(appended[len(appended)-1].ID[:], next.ID[:]))
}

func TestAPIBranchTwoPhase(t *testing.T) {
	ctx := t.Context()
	s, dir := apiNewStore(t, nil)
	id := apiNewSession(t, s)
	sdir := apiSessionDir(dir, id)

	a := apiAppend(t, s, id, UserText("a"))
	b := apiAppend(t, s, id, AssistantText("b"))
	c := apiAppend(t, s, id, UserText("c"))

	filesBefore := apiFiles(t, sdir)
	treeBefore := apiTree(t, s, id)

	// Phase one: Branch selects a parent and changes nothing else.
	require.NoError(t, s.Branch(ctx, id, a.ID))
	assert.Equal(t, c.ID, apiHead(t, s, id), "HEAD does not move on Branch")
	parent, branching, err := s.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, a.ID, parent, "NextParent reports the pending selection")
	assert.True(t, branching)
	assert.Equal(t, filesBefore, apiFiles(t, sdir), "Branch writes nothing")
	apiSameNodes(t, treeBefore, apiTree(t, s, id))
	apiSameEvents(t, []Event{a}, apiLoad(t, s, id)) // the path the next Append extends
	headPath, err := s.LoadPath(ctx, id, c.ID)
	require.NoError(t, err)
	apiSameEvents(t, []Event{a, b, c}, headPath)

	// Phase two: the next Append is a child of the selection and moves HEAD.
	d := apiAppend(t, s, id, AssistantText("d"))
	assert.Equal(t, a.ID, d.ParentID)
	assert.Equal(t, a.ID, d.BranchFrom)
	assert.Equal(t, d.ID, apiHead(t, s, id))
	parent, branching, err = s.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, d.ID, parent)
	assert.False(t, branching, "the selection is used up")
	apiSameEvents(t, []Event{a, d}, apiLoad(t, s, id))
	abandoned, err := s.LoadPath(ctx, id, c.ID)
	require.NoError(t, err)
	apiSameEvents(t, []Event{a, b, c}, abandoned)
	nodes := apiTree(t, s, id)
	require.Len(t, nodes, 4)
	assert.Equal(t, a.ID, nodes[3].BranchFrom, "the tree shows where the branch starts")

	e := apiAppend(t, s, id, UserText("e"))
	assert.Equal(t, d.ID, e.ParentID)
	assert.Equal(t, uuid.Nil, e.BranchFrom, "only the first event of a branch has BranchFrom")

	// The last selection wins; an unknown id leaves the selection as it was.
	require.NoError(t, s.Branch(ctx, id, a.ID))
	require.NoError(t, s.Branch(ctx, id, b.ID))
	for _, bad := range []uuid.UUID{uuid.New(), uuid.Nil} {
		assert.ErrorIs(t, s.Branch(ctx, id, bad), ErrNotFound, "Branch to %s", bad)
	}
	parent, branching, err = s.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, b.ID, parent)
	assert.True(t, branching)

	// Branch to the current HEAD cancels the pending selection.
	require.NoError(t, s.Branch(ctx, id, e.ID))
	parent, branching, err = s.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, e.ID, parent)
	assert.False(t, branching)
	f := apiAppend(t, s, id, UserText("f"))
	assert.Equal(t, e.ID, f.ParentID)
	assert.Equal(t, uuid.Nil, f.BranchFrom)

	// A pending selection lives in memory only: Close forgets it.
	require.NoError(t, s.Branch(ctx, id, a.ID))
	require.NoError(t, s.Close())
	s2 := apiOpen(t, dir, nil)
	assert.Equal(t, f.ID, apiHead(t, s2, id))
	parent, branching, err = s2.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, f.ID, parent, "the selection was forgotten")
	assert.False(t, branching)
	g := apiAppend(t, s2, id, UserText("g"))
	assert.Equal(t, f.ID, g.ParentID)
	assert.Equal(t, uuid.Nil, g.BranchFrom)
	apiSameEvents(t, []Event{a, d, e, f, g}, apiLoad(t, s2, id))

	// Branch on an empty or unknown session.
	empty := apiNewSession(t, s2)
	assert.ErrorIs(t, s2.Branch(ctx, empty, uuid.Nil), ErrNotFound)
	assert.ErrorIs(t, s2.Branch(ctx, empty, a.ID), ErrNotFound, "an event of another session")
	assert.ErrorIs(t, s2.Branch(ctx, uuid.New(), a.ID), ErrNotFound)
}

func TestAPILoadBranchesAfterReopen(t *testing.T) {
	ctx := t.Context()
	s, dir := apiNewStore(t, nil)
	id := apiNewSession(t, s)

	// r ─ a1 ─ a2 ─ a3
	//  │    └ c1 ─ c2      (branch from a1)
	//  └ b1 ─ b2           (branch from r)
	inputs := map[string]Event{
		"r":  UserText("root question"),
		"a1": AssistantMessage(Message{Content: "a1", Model: "m", Usage: &Usage{InputTokens: 10, OutputTokens: 3}}),
		"a2": ToolCallEvent(ToolCall{CallID: "call_1", Name: "ls", Arguments: json.RawMessage(`{ "path" : "." }`)}),
		"a3": ToolResultEvent(ToolResult{CallID: "call_1", Output: "go.mod\nmain.go\n"}),
		"b1": {Kind: KindBranchSummary, Record: json.RawMessage(`{"summary": "tried a"}`)},
		"b2": AssistantText("b2"),
		"c1": {Kind: KindCustom, Role: RoleNone, Record: json.RawMessage(` [1, 2, 3] `)},
		"c2": {Kind: KindCompaction, Record: json.RawMessage(`"summary so far"`)},
	}
	ev := map[string]Event{}
	for _, step := range []struct{ name, branch string }{
		{"r", ""}, {"a1", ""}, {"a2", ""}, {"a3", ""},
		{"b1", "r"}, {"b2", ""},
		{"c1", "a1"}, {"c2", ""},
	} {
		if step.branch != "" {
			require.NoError(t, s.Branch(ctx, id, ev[step.branch].ID))
		}
		ev[step.name] = apiAppend(t, s, id, inputs[step.name])
		if step.branch != "" {
			assert.Equal(t, ev[step.branch].ID, ev[step.name].BranchFrom, step.name)
		}
	}
	paths := map[string][]string{
		"r":  {"r"},
		"a1": {"r", "a1"},
		"a2": {"r", "a1", "a2"},
		"a3": {"r", "a1", "a2", "a3"},
		"b1": {"r", "b1"},
		"b2": {"r", "b1", "b2"},
		"c1": {"r", "a1", "c1"},
		"c2": {"r", "a1", "c1", "c2"},
	}
	events := func(names []string) []Event {
		out := make([]Event, len(names))
		for i, n := range names {
			out[i] = ev[n]
		}
		return out
	}
	treeBefore := apiTree(t, s, id)
	require.Len(t, treeBefore, len(inputs))

	require.NoError(t, s.Close())
	s2 := apiOpen(t, dir, nil)

	for leaf, names := range paths {
		t.Run("LoadPath/"+leaf, func(t *testing.T) {
			got, err := s2.FullPath(ctx, id, ev[leaf].ID)
			require.NoError(t, err)
			apiSameEvents(t, events(names), got)
		})
		t.Run("Event/"+leaf, func(t *testing.T) {
			got, err := s2.Event(ctx, id, ev[leaf].ID)
			require.NoError(t, err)
			apiSameEvent(t, ev[leaf], got)
			assert.Equal(t, apiCompact(t, string(inputs[leaf].Record)), string(got.Record), "records are stored compact")
		})
	}

	assert.Equal(t, ev["c2"].ID, apiHead(t, s2, id), "HEAD is the newest event")
	apiSameEvents(t, events(paths["c2"]), apiLoad(t, s2, id))

	tree := apiTree(t, s2, id)
	apiSameNodes(t, treeBefore, tree)
	for _, n := range tree {
		full, err := s2.Event(ctx, id, n.ID)
		require.NoError(t, err)
		assert.Equal(t, int64(len(full.Record)), n.Size, "Size of %s is the length of its compact record", n.ID)
		assert.Equal(t, full.ParentID, n.ParentID)
		assert.Equal(t, full.BranchFrom, n.BranchFrom)
		assert.Equal(t, full.Kind, n.Kind)
		assert.Equal(t, full.Role, n.Role)
	}

	children := []struct {
		of   uuid.UUID
		want []string
	}{
		{uuid.Nil, []string{"r"}},
		{ev["r"].ID, []string{"a1", "b1"}},
		{ev["a1"].ID, []string{"a2", "c1"}},
		{ev["a2"].ID, []string{"a3"}},
		{ev["a3"].ID, nil},
		{ev["c2"].ID, nil},
	}
	for _, tc := range children {
		got, err := s2.Children(ctx, id, tc.of)
		require.NoError(t, err)
		want := make([]uuid.UUID, len(tc.want))
		for i, n := range tc.want {
			want[i] = ev[n].ID
		}
		assert.Equal(t, want, apiNodeIDs(got), "children of %s", tc.of)
		for _, n := range got {
			assert.Equal(t, int64(len(apiCompact(t, string(inputs[apiNameOf(ev, n.ID)].Record)))), n.Size)
		}
	}

	// Lookups of things that are not there.
	_, err := s2.LoadPath(ctx, id, uuid.New())
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s2.Event(ctx, id, uuid.New())
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s2.Children(ctx, id, uuid.New())
	assert.ErrorIs(t, err, ErrNotFound)
	unknown := uuid.New()
	_, err = s2.Load(ctx, unknown)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s2.LoadPath(ctx, unknown, ev["r"].ID)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s2.Event(ctx, unknown, ev["r"].ID)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s2.Tree(ctx, unknown)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s2.Children(ctx, unknown, uuid.Nil)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s2.Head(ctx, unknown)
	assert.ErrorIs(t, err, ErrNotFound)
	_, _, err = s2.NextParent(ctx, unknown)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = os.Stat(apiSessionDir(dir, unknown))
	assert.ErrorIs(t, err, fs.ErrNotExist, "a lookup of an unknown session creates nothing")
}

// apiNameOf returns the key of the event with the given id.
func apiNameOf(ev map[string]Event, id uuid.UUID) string {
	for k, e := range ev {
		if e.ID == id {
			return k
		}
	}
	return ""
}

func TestAPIEmptySession(t *testing.T) {
	ctx := t.Context()
	s, dir := apiNewStore(t, nil)
	id := apiNewSession(t, s)

	check := func(t *testing.T, s *Store) {
		evs, err := s.Load(ctx, id)
		require.NoError(t, err)
		assert.NotNil(t, evs, "an empty session loads as an empty, non-nil slice")
		assert.Empty(t, evs)
		nodes, err := s.Tree(ctx, id)
		require.NoError(t, err)
		assert.Empty(t, nodes)
		roots, err := s.Children(ctx, id, uuid.Nil)
		require.NoError(t, err)
		assert.Empty(t, roots)
		assert.Equal(t, uuid.Nil, apiHead(t, s, id))
	}
	t.Run("open", func(t *testing.T) { check(t, s) })
	require.NoError(t, s.Close())
	_, err := os.Stat(filepath.Join(apiSessionDir(dir, id), "HEAD"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "no HEAD file while the session has no events")
	t.Run("reopened", func(t *testing.T) { check(t, apiOpen(t, dir, nil)) })
}

func TestAPIChunkRotation(t *testing.T) {
	const chunkSize = 1024
	s, dir := apiNewStore(t, &Options{ChunkSize: chunkSize, Compression: CompressionNone})
	id := apiNewSession(t, s)
	sdir := apiSessionDir(dir, id)

	var appended []Event
	for i := range 12 {
		appended = append(appended, apiAppend(t, s, id, UserText(fmt.Sprintf("%03d %s", i, strings.Repeat("x", 150)))))
	}
	big := apiAppend(t, s, id, Event{Kind: KindCustom, Record: json.RawMessage(`{"blob":"` + strings.Repeat("b", 3*chunkSize) + `"}`)})
	appended = append(appended, big)
	for i := range 3 {
		appended = append(appended, apiAppend(t, s, id, AssistantMessage(Message{Content: fmt.Sprintf("after %d", i)})))
	}

	names, ids := apiChunkLines(t, sdir)
	require.GreaterOrEqual(t, len(names), 3, "the events span several chunks: %v", names)
	var total int
	bigChunk := ""
	for i, name := range names {
		assert.Equal(t, fmt.Sprintf("%06d.jsonl", i), name, "chunks are numbered from 0 without gaps")
		total += len(ids[name])
		info, err := os.Stat(filepath.Join(sdir, "chunks", name))
		require.NoError(t, err)
		if len(ids[name]) == 1 && ids[name][0] == big.ID {
			bigChunk = name
			assert.Greater(t, info.Size(), int64(chunkSize))
			continue
		}
		assert.NotContains(t, ids[name], big.ID, "the big record shares chunk %s", name)
		assert.LessOrEqual(t, info.Size(), int64(chunkSize), "chunk %s is over ChunkSize", name)
		assert.NotEmpty(t, ids[name], "chunk %s is empty", name)
	}
	assert.NotEmpty(t, bigChunk, "a record bigger than ChunkSize gets a chunk of its own")
	assert.Equal(t, len(appended), total, "every event is in exactly one chunk")
	// Records appear in the chunks in append order.
	var order []uuid.UUID
	for _, name := range names {
		order = append(order, ids[name]...)
	}
	assert.Equal(t, apiIDs(appended), order)

	apiSameEvents(t, appended, apiLoad(t, s, id))
	require.NoError(t, s.Close())

	s2 := apiOpen(t, dir, &Options{ChunkSize: chunkSize, Compression: CompressionNone})
	apiSameEvents(t, appended, apiLoad(t, s2, id))
	for _, want := range appended {
		got, err := s2.Event(t.Context(), id, want.ID)
		require.NoError(t, err)
		apiSameEvent(t, want, got)
	}
	// Appending after the reopen continues the active chunk or starts the
	// next one; either way everything loads.
	more := apiAppend(t, s2, id, UserText(strings.Repeat("y", 600)))
	more2 := apiAppend(t, s2, id, UserText(strings.Repeat("z", 600)))
	apiSameEvents(t, append(appended, more, more2), apiLoad(t, s2, id))
	names2, _ := apiChunkLines(t, sdir)
	assert.Greater(t, len(names2), len(names))
}

func TestAPIChunkSizeOne(t *testing.T) {
	// With the smallest ChunkSize every record is over it, so every record
	// gets a chunk of its own.
	s, dir := apiNewStore(t, &Options{ChunkSize: 1, Compression: CompressionNone})
	id := apiNewSession(t, s)
	var appended []Event
	for i := range 4 {
		appended = append(appended, apiAppend(t, s, id, UserText(fmt.Sprint(i))))
	}
	names, ids := apiChunkLines(t, apiSessionDir(dir, id))
	require.Len(t, names, 4)
	for i, name := range names {
		assert.Equal(t, []uuid.UUID{appended[i].ID}, ids[name])
	}
	require.NoError(t, s.Close())
	apiSameEvents(t, appended, apiLoad(t, apiOpen(t, dir, &Options{ChunkSize: 1, Compression: CompressionNone}), id))
}

func TestAPIRecordsStoredCompact(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"indented object", "{\n  \"b\": [1, 2,\n    3],\n  \"a\": \"x  y\"\n}\n", `{"b":[1,2,3],"a":"x  y"}`},
		{"escaped newline in a string", `{"text": "line 1\nline 2\r\n"}`, `{"text":"line 1\nline 2\r\n"}`},
		{"top-level string with newline", `"a\nb"`, `"a\nb"`},
		{"number with spaces", "  42\t", `42`},
		{"array of literals", "[ true , false , null ]", `[true,false,null]`},
		{"no html escaping", `{"html": "<a href=\"x\">&amp;</a>", "sep": "\u2028", "utf8": "été"}`, `{"html":"<a href=\"x\">&amp;</a>","sep":"\u2028","utf8":"été"}`},
		{"framing names inside", `{"id": "x", "parent_id": 1, "record": {"crc": "00000000"}, "crc": "deadbeef"}`, `{"id":"x","parent_id":1,"record":{"crc":"00000000"},"crc":"deadbeef"}`},
		{"brackets in strings", `{"s": "}\"{[", "n": -1.5e+10, "e": {}, "l": []}`, `{"s":"}\"{[","n":-1.5e+10,"e":{},"l":[]}`},
		{"deep nesting", `[[[[{"a":[[{"b":null}]]}]]]]`, `[[[[{"a":[[{"b":null}]]}]]]]`},
	}
	s, dir := apiNewStore(t, nil)
	id := apiNewSession(t, s)
	var appended []Event
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := apiAppend(t, s, id, Event{Kind: KindCustom, Record: json.RawMessage(tc.in)})
			assert.Equal(t, tc.want, string(ev.Record), "Append returns the compact record")
			got, err := s.Event(t.Context(), id, ev.ID)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got.Record))
			nodes := apiTree(t, s, id)
			assert.Equal(t, int64(len(tc.want)), nodes[len(nodes)-1].Size)
			var v any
			assert.NoError(t, got.Decode(&v))
			appended = append(appended, ev)
		})
	}
	require.Len(t, appended, len(cases))
	// The escaped newline decodes to a real one.
	var rec struct{ Text string }
	require.NoError(t, appended[1].Decode(&rec))
	assert.Equal(t, "line 1\nline 2\r\n", rec.Text)
	require.NoError(t, s.Close())

	// One line per record: no newline leaks out of a record.
	names, ids := apiChunkLines(t, apiSessionDir(dir, id))
	var n int
	for _, name := range names {
		n += len(ids[name])
	}
	assert.Equal(t, len(cases), n)
	apiSameEvents(t, appended, apiLoad(t, apiOpen(t, dir, nil), id))
}

// apiMethod is one Store method called with fixed arguments.
type apiMethod struct {
	name string
	call func(ctx context.Context, s *Store, session, event uuid.UUID) error
}

// apiMethods lists every Store method that takes a context.
func apiMethods() []apiMethod {
	return []apiMethod{
		{"Create", func(ctx context.Context, s *Store, _, _ uuid.UUID) error {
			_, err := s.Create(ctx, Meta{})
			return err
		}},
		{"List", func(ctx context.Context, s *Store, _, _ uuid.UUID) error {
			_, err := s.List(ctx)
			return err
		}},
		{"Meta", func(ctx context.Context, s *Store, id, _ uuid.UUID) error {
			_, err := s.Meta(ctx, id)
			return err
		}},
		{"UpdateMeta", func(ctx context.Context, s *Store, id, _ uuid.UUID) error {
			_, err := s.UpdateMeta(ctx, id, func(m *Meta) { m.Name = "changed" })
			return err
		}},
		{"Append", func(ctx context.Context, s *Store, id, _ uuid.UUID) error {
			_, err := s.Append(ctx, id, UserText("x"))
			return err
		}},
		{"Branch", func(ctx context.Context, s *Store, id, ev uuid.UUID) error {
			return s.Branch(ctx, id, ev)
		}},
		{"Head", func(ctx context.Context, s *Store, id, _ uuid.UUID) error {
			_, err := s.Head(ctx, id)
			return err
		}},
		{"NextParent", func(ctx context.Context, s *Store, id, _ uuid.UUID) error {
			_, _, err := s.NextParent(ctx, id)
			return err
		}},
		{"Load", func(ctx context.Context, s *Store, id, _ uuid.UUID) error {
			_, err := s.Load(ctx, id)
			return err
		}},
		{"LoadPath", func(ctx context.Context, s *Store, id, ev uuid.UUID) error {
			_, err := s.LoadPath(ctx, id, ev)
			return err
		}},
		{"Event", func(ctx context.Context, s *Store, id, ev uuid.UUID) error {
			_, err := s.Event(ctx, id, ev)
			return err
		}},
		{"Tree", func(ctx context.Context, s *Store, id, _ uuid.UUID) error {
			_, err := s.Tree(ctx, id)
			return err
		}},
		{"Children", func(ctx context.Context, s *Store, id, ev uuid.UUID) error {
			_, err := s.Children(ctx, id, ev)
			return err
		}},
	}
}

func TestAPIClose(t *testing.T) {
	s, dir := apiNewStore(t, nil)
	id := apiNewSession(t, s)
	ev := apiAppend(t, s, id, UserText("hello"))
	// Every method works before Close (so ErrClosed below is Close's doing).
	for _, m := range apiMethods() {
		require.NoError(t, m.call(t.Context(), s, id, ev.ID), m.name)
	}

	require.NoError(t, s.Close())
	assert.NoError(t, s.Close(), "Close is idempotent")
	assert.Equal(t, dir, s.Dir())
	for _, m := range apiMethods() {
		t.Run(m.name, func(t *testing.T) {
			assert.ErrorIs(t, m.call(t.Context(), s, id, ev.ID), ErrClosed)
		})
	}

	// Close released the session: another Store can write it.
	s2 := apiOpen(t, dir, nil)
	apiAppend(t, s2, id, UserText("again"))
}

func TestAPIContextCanceled(t *testing.T) {
	s, dir := apiNewStore(t, nil)
	id := apiNewSession(t, s)
	ev := apiAppend(t, s, id, UserText("hello"))
	files := apiFiles(t, dir)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, m := range apiMethods() {
		t.Run(m.name, func(t *testing.T) {
			assert.ErrorIs(t, m.call(ctx, s, id, ev.ID), context.Canceled)
		})
	}
	// Nothing was written by the cancelled calls.
	assert.Equal(t, files, apiFiles(t, dir))
	apiSameEvents(t, []Event{ev}, apiLoad(t, s, id))
	list, err := s.List(t.Context())
	require.NoError(t, err)
	assert.Len(t, list, 1)
	m, err := s.Meta(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, "test session", m.Name)

	// An expired deadline is reported as such.
	dctx, dcancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer dcancel()
	_, err = s.Append(dctx, id, UserText("late"))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestAPIConcurrentAppends(t *testing.T) {
	const writers, perWriter = 8, 25
	s, dir := apiNewStore(t, nil)
	id := apiNewSession(t, s)
	other := apiNewSession(t, s)

	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter*2)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				if _, err := s.Append(ctx, id, UserText(fmt.Sprintf("w%d-%d", w, i))); err != nil {
					errs <- err
				}
				if _, err := s.Append(ctx, other, UserText(fmt.Sprintf("o%d-%d", w, i))); err != nil {
					errs <- err
				}
			}
		})
	}
	// Readers run alongside the writers.
	done := make(chan struct{})
	var readers sync.WaitGroup
	for range 3 {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := s.Load(ctx, id); err != nil {
					errs <- err
				}
				if _, err := s.Tree(ctx, id); err != nil {
					errs <- err
				}
				if _, _, err := s.NextParent(ctx, id); err != nil {
					errs <- err
				}
				if _, err := s.List(ctx); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(done)
	readers.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}

	check := func(t *testing.T, s *Store, session uuid.UUID, prefix string) {
		nodes := apiTree(t, s, session)
		require.Len(t, nodes, writers*perWriter, "every Append landed")
		for i, n := range nodes {
			if i == 0 {
				assert.Equal(t, uuid.Nil, n.ParentID)
				continue
			}
			assert.Equal(t, nodes[i-1].ID, n.ParentID, "node %d continues the chain", i)
			assert.Equal(t, uuid.Nil, n.BranchFrom)
			assert.Negative(t, bytes.Compare(nodes[i-1].ID[:], n.ID[:]), "ids increase in log order")
		}
		path := apiLoad(t, s, session)
		require.Len(t, path, writers*perWriter, "a single chain: the active path holds every event")
		assert.Equal(t, apiNodeIDs(nodes), apiIDs(path))
		seen := map[string]bool{}
		for _, ev := range path {
			m, err := ev.Message()
			require.NoError(t, err)
			seen[m.Content] = true
		}
		for w := range writers {
			for i := range perWriter {
				assert.True(t, seen[fmt.Sprintf("%s%d-%d", prefix, w, i)], "%s%d-%d is missing", prefix, w, i)
			}
		}
	}
	check(t, s, id, "w")
	check(t, s, other, "o")
	require.NoError(t, s.Close())
	s2 := apiOpen(t, dir, nil)
	check(t, s2, id, "w")
	check(t, s2, other, "o")
}

func TestAPIConcurrentCreate(t *testing.T) {
	// Several goroutines create the same id: exactly one wins, the others
	// get ErrExists.
	s, _ := apiNewStore(t, nil)
	id := uuid.New()
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Go(func() {
			_, results[i] = s.Create(t.Context(), Meta{ID: id, Name: fmt.Sprint(i)})
		})
	}
	wg.Wait()
	var ok int
	for _, err := range results {
		if err == nil {
			ok++
			continue
		}
		assert.ErrorIs(t, err, ErrExists)
	}
	assert.Equal(t, 1, ok)
	list, err := s.List(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, id, list[0].ID)
}

var errAPIInjected = errors.New("injected fault")

func TestAPISessionFailed(t *testing.T) {
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test fails, cuts or checks.
	cases := []struct {
		name string
		// fault is installed for the second Append only.
		fault func(op vfs.Op, path string) error
		// acked says whether that Append is acknowledged anyway.
		acked bool
		// sticky says whether the session refuses writes afterwards.
		sticky bool
		// fill appends events before the second Append until its index
		// line is the one that makes index.jsonl's batch (index.HoldLines)
		// written.
		fill bool
	}{
		{
			name: "chunk sync fails",
			fault: func(op vfs.Op, path string) error {
				if op == vfs.OpSync && strings.Contains(filepath.ToSlash(path), "/chunks/") {
					return errAPIInjected
				}
				return nil
			},
			sticky: true,
		},
		{
			name: "index write fails after the record is durable",
			fault: func(op vfs.Op, path string) error {
				if op == vfs.OpWrite && strings.HasSuffix(path, "index.jsonl") {
					return errAPIInjected
				}
				return nil
			},
			acked:  true,
			sticky: true,
			fill:   true,
		},
		{
			name: "chunk write fails and is cut back",
			fault: func(op vfs.Op, path string) error {
				if op == vfs.OpWrite && strings.Contains(filepath.ToSlash(path), "/chunks/") {
					return errAPIInjected
				}
				return nil
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			mem := vfs.NewMemFS()
			s := apiOpen(t, "/store", &Options{JournalSize: -1, fs: mem})
			id := apiNewSession(t, s)
			prior := []Event{apiAppend(t, s, id, UserText("first"))}
			for tc.fill && len(prior) < index.HoldLines-1 {
				prior = append(prior, apiAppend(t, s, id, UserText("fill")))
			}
			first := prior[len(prior)-1]

			mem.SetFault(tc.fault)
			second, err := s.Append(ctx, id, UserText("second"))
			mem.SetFault(nil)
			if tc.acked {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, errAPIInjected)
				assert.NotErrorIs(t, err, ErrSessionFailed, "the failing call reports the I/O error itself")
			}

			third, err := s.Append(ctx, id, UserText("third"))
			_, metaErr := s.UpdateMeta(ctx, id, func(m *Meta) { m.Name = "x" })
			if tc.sticky {
				assert.ErrorIs(t, err, ErrSessionFailed)
				assert.ErrorIs(t, metaErr, ErrSessionFailed)
			} else {
				require.NoError(t, err)
				assert.NoError(t, metaErr)
				assert.Equal(t, first.ID, third.ParentID, "the failed Append left no trace")
			}

			// Acknowledged events stay readable.
			want := append([]Event(nil), prior...)
			if tc.acked {
				want = append(want, second)
			}
			if !tc.sticky {
				want = append(want, third)
			}
			apiSameEvents(t, want, apiLoad(t, s, id))
			assert.Equal(t, want[len(want)-1].ID, apiHead(t, s, id))

			// Reopening reconciles the files and the session takes writes again.
			require.NoError(t, s.Close())
			s2 := apiOpen(t, "/store", &Options{JournalSize: -1, fs: mem})
			got := apiLoad(t, s2, id)
			if tc.acked || !tc.sticky {
				apiSameEvents(t, want, got)
			} else {
				// The unacknowledged event may or may not be there, whole.
				require.NotEmpty(t, got)
				require.LessOrEqual(t, len(got), 2)
				apiSameEvent(t, first, got[0])
				if len(got) == 2 {
					m, err := got[1].Message()
					require.NoError(t, err)
					assert.Equal(t, "second", m.Content)
				}
			}
			next := apiAppend(t, s2, id, UserText("after reopen"))
			assert.Equal(t, got[len(got)-1].ID, next.ParentID)
		})
	}
}

// TestOpenCreatesOnlyTheRoot: a writable Open creates the root directory
// but not its parents, so a mistyped path fails with ErrNoStore instead of
// making a new, empty store somewhere else; an existing empty directory
// becomes a store.
func TestOpenCreatesOnlyTheRoot(t *testing.T) {
	parent := t.TempDir()
	deep := filepath.Join(parent, "no", "such", "dir")
	_, err := Open(deep, nil)
	require.ErrorIs(t, err, ErrNoStore)
	assert.Contains(t, err.Error(), deep)
	assert.Contains(t, err.Error(), filepath.Join(parent, "no", "such")+" does not exist")
	_, err = os.Stat(filepath.Join(parent, "no"))
	assert.ErrorIs(t, err, os.ErrNotExist, "Open created a parent directory")

	// One level below an existing directory: the root is created.
	root := filepath.Join(parent, "store")
	s := apiOpen(t, root, nil)
	apiNewSession(t, s)
	info, err := os.Stat(filepath.Join(root, sessionsDir))
	require.NoError(t, err)
	assert.True(t, info.IsDir())
	assert.FileExists(t, filepath.Join(root, rootConfigName))

	// A file is no store, for writing or reading.
	file := filepath.Join(parent, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	for _, ro := range []bool{false, true} {
		_, err = Open(file, &Options{ReadOnly: ro})
		assert.ErrorIs(t, err, ErrNoStore, "read-only %t", ro)
		assert.ErrorContains(t, err, file+" (not a directory)")
	}
}

// TestOpenMakesSessionsDirDurable: when Open creates the sessions
// directory of a root whose sessionstore.json exists already (the
// directory was removed), the new directory's entry is durable when Open
// returns: a session created and appended to, then a power cut, keeps it.
// (Writing a new sessionstore.json would sync the root too; here there is
// none to write.)
func TestOpenMakesSessionsDirDurable(t *testing.T) {
	ctx := t.Context()
	m := vfs.NewMemFS()
	require.NoError(t, openMem(t, m, Options{}).Close())
	require.NoError(t, m.Remove(filepath.Join(memRoot, sessionsDir)))
	require.NoError(t, m.SyncDir(memRoot))

	s := openMem(t, m, Options{})
	// Durable when Open returns, before anything else syncs the root (a
	// Create's catalogue records would).
	opened := m.CrashClone(vfs.KeepSynced, 0)
	info, err := opened.Stat(filepath.Join(memRoot, sessionsDir))
	require.NoError(t, err, "the sessions directory Open made survives a power cut right after it")
	assert.True(t, info.IsDir())
	meta, err := s.Create(ctx, Meta{Name: "after the root lost its sessions"})
	require.NoError(t, err)
	ev, err := s.Append(ctx, meta.ID, UserText("durable"))
	require.NoError(t, err)

	cut := openMem(t, m.CrashClone(vfs.KeepSynced, 0), Options{})
	defer cut.Close()
	got, err := cut.Event(ctx, meta.ID, ev.ID)
	require.NoError(t, err, "the acknowledged event survives the power cut")
	assert.Equal(t, string(ev.Record), string(got.Record))
	require.NoError(t, s.Close())
}

// TestOpenBesideAnotherOpenMakingTheRoot: a second Open that finds a new
// root's config relies on the first having synced the root's name before
// it wrote the config (the second syncs nothing above the root). The
// first Open's last sync fails here, standing for a first process that
// has not reached it when the second opens, appends and is acknowledged.
func TestOpenBesideAnotherOpenMakingTheRoot(t *testing.T) {
	ctx := t.Context()
	m := vfs.NewMemFS()
	configWritten := false
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpRename && filepath.Base(path) == rootConfigName {
			configWritten = true
		}
		if op == vfs.OpSyncDir && configWritten && path == filepath.Dir(memRoot) {
			return errors.New("the first process has not reached this sync yet")
		}
		return nil
	})
	o := Options{fs: m}
	_, err := Open(memRoot, &o)
	require.Error(t, err, "the first Open fails at its last sync")
	require.True(t, configWritten, "the fault hook saw the config written")
	m.SetFault(nil)

	second := openMem(t, m, Options{})
	meta, err := second.Create(ctx, Meta{Name: "beside the first"})
	require.NoError(t, err)
	ev, err := second.Append(ctx, meta.ID, UserText("acknowledged"))
	require.NoError(t, err)

	cut := openMem(t, m.CrashClone(vfs.KeepSynced, 0), Options{})
	defer cut.Close()
	got, err := cut.Event(ctx, meta.ID, ev.ID)
	require.NoError(t, err, "the acknowledged event survives a power cut")
	assert.Equal(t, string(ev.Record), string(got.Record))
	require.NoError(t, second.Close())
}

func TestCloseSessionReleasesTheLock(t *testing.T) {
	ctx := context.Background()
	a, dir := apiNewStore(t, nil)
	id := apiNewSession(t, a)
	apiAppend(t, a, id, UserText("one"))
	b := apiOpen(t, dir, nil)
	_, err := b.Append(ctx, id, UserText("two"))
	require.ErrorIs(t, err, ErrLocked)
	require.NoError(t, a.CloseSession(ctx, id))
	apiAppend(t, b, id, UserText("two"))
	require.NoError(t, b.CloseSession(ctx, id))
	evs, err := a.Load(ctx, id)
	require.NoError(t, err)
	assert.Len(t, evs, 2)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, a.CloseSession(cctx, id), context.Canceled)
}
