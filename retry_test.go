package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// wrongVariantV7 returns a version 7 id of another variant than RFC 4122.
func wrongVariantV7() uuid.UUID {
	id := uuid.Must(uuid.NewV7())
	id[8] = id[8]&0x3f | 0xc0 // Microsoft variant
	return id
}

// rtWithID returns ev carrying the caller-chosen id.
func rtWithID(ev Event, id uuid.UUID) Event {
	ev.ID = id
	return ev
}

// rtCount counts the events of the session with the given id (on any
// branch).
func rtCount(t *testing.T, s *Store, session, id uuid.UUID) int {
	t.Helper()
	n := 0
	for _, node := range apiTree(t, s, session) {
		if node.ID == id {
			n++
		}
	}
	return n
}

func TestAppendCallerID(t *testing.T) {
	rec := json.RawMessage(`{"content":"hello","n":1}`)
	stored := Event{Kind: KindMessage, Role: RoleUser, Record: rec}
	cases := []struct {
		name    string
		ev      func(id uuid.UUID) Event // the retried event, given the stored one's id
		want    error                    // nil: the stored event is returned
		newID   bool                     // a new event is appended under the given id
		invalid bool
	}{
		{name: "same content", ev: func(id uuid.UUID) Event { return rtWithID(stored, id) }},
		{name: "same record in another layout", ev: func(id uuid.UUID) Event {
			return Event{ID: id, Kind: KindMessage, Role: RoleUser, Record: json.RawMessage("{ \"content\": \"hello\",\n  \"n\": 1 }")}
		}},
		{name: "other record", ev: func(id uuid.UUID) Event {
			return Event{ID: id, Kind: KindMessage, Role: RoleUser, Record: json.RawMessage(`{"content":"hello","n":2}`)}
		}, want: ErrConflict},
		{name: "members in another order", ev: func(id uuid.UUID) Event {
			return Event{ID: id, Kind: KindMessage, Role: RoleUser, Record: json.RawMessage(`{"n":1,"content":"hello"}`)}
		}, want: ErrConflict},
		{name: "other kind", ev: func(id uuid.UUID) Event { return Event{ID: id, Kind: KindCustom, Role: RoleUser, Record: rec} }, want: ErrConflict},
		{name: "other role", ev: func(id uuid.UUID) Event { return Event{ID: id, Kind: KindMessage, Role: RoleAssistant, Record: rec} }, want: ErrConflict},
		{name: "no role", ev: func(id uuid.UUID) Event { return Event{ID: id, Kind: KindMessage, Record: rec} }, want: ErrConflict},
		{name: "a new id", ev: func(uuid.UUID) Event { return rtWithID(stored, uuid.Must(uuid.NewV7())) }, newID: true},
		{name: "a version 4 id", ev: func(uuid.UUID) Event { return rtWithID(stored, uuid.New()) }, want: ErrInvalidEvent, invalid: true},
		{name: "a version 7 id of another variant", ev: func(uuid.UUID) Event { return rtWithID(stored, wrongVariantV7()) }, want: ErrInvalidEvent, invalid: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s, dir := apiNewStore(t, nil)
			session := apiNewSession(t, s)
			apiAppend(t, s, session, UserText("before"))
			id := uuid.Must(uuid.NewV7())
			first := apiAppend(t, s, session, rtWithID(stored, id))
			require.Equal(t, id, first.ID, "the caller's id is used")
			apiAppend(t, s, session, AssistantText("after: HEAD moved on"))
			require.NoError(t, s.Flush(ctx, session))
			files := apiFiles(t, apiSessionDir(dir, session))
			tree := apiTree(t, s, session)

			ev := tc.ev(id)
			got, err := s.Append(ctx, session, ev)
			switch {
			case tc.newID:
				require.NoError(t, err)
				assert.Equal(t, ev.ID, got.ID)
				assert.Len(t, apiTree(t, s, session), len(tree)+1)
				assert.Equal(t, got.ID, apiHead(t, s, session))
				return
			case tc.want != nil:
				require.ErrorIs(t, err, tc.want)
				if !tc.invalid {
					assert.NotErrorIs(t, err, ErrInvalidEvent)
					assert.Contains(t, err.Error(), id.String(), "the error names the id")
				}
				assert.Equal(t, Event{}, got)
			default:
				require.NoError(t, err)
				apiSameEvent(t, first, got)
				assert.Equal(t, first.Time, got.Time, "the stored time, not a new one")
				assert.Equal(t, first.ParentID, got.ParentID)
			}
			require.NoError(t, s.Flush(ctx, session))
			assert.Equal(t, files, apiFiles(t, apiSessionDir(dir, session)), "nothing written")
			apiSameNodes(t, tree, apiTree(t, s, session))
			assert.Equal(t, 1, rtCount(t, s, session, id))
		})
	}
}

func TestAppendCallerIDBlob(t *testing.T) {
	ctx := t.Context()
	s, _ := apiNewStore(t, &Options{BlobThreshold: 64})
	session := apiNewSession(t, s)
	id := uuid.Must(uuid.NewV7())
	big := ToolResultEvent(ToolResult{CallID: "c1", Output: strings.Repeat("x", 500)})
	first := apiAppend(t, s, session, rtWithID(big, id))
	require.NotEmpty(t, first.Digest, "stored as a blob")

	got, err := s.Append(ctx, session, rtWithID(big, id))
	require.NoError(t, err)
	apiSameEvent(t, first, got)
	assert.Equal(t, first.Digest, got.Digest)

	other := ToolResultEvent(ToolResult{CallID: "c1", Output: strings.Repeat("y", 500)})
	_, err = s.Append(ctx, session, rtWithID(other, id))
	require.ErrorIs(t, err, ErrConflict)
	assert.Len(t, apiTree(t, s, session), 1)
}

func TestAppendWithExpectParent(t *testing.T) {
	type setup struct{ root, mid, head Event }
	cases := []struct {
		name   string
		branch func(st setup) uuid.UUID // Branch to it before the append; nil for none
		opts   func(st setup) AppendOptions
		want   error
		parent func(st setup) uuid.UUID // of the appended event
	}{
		{name: "HEAD as expected", opts: func(st setup) AppendOptions { return AppendOptions{ExpectParent: st.head.ID} },
			parent: func(st setup) uuid.UUID { return st.head.ID }},
		{name: "HEAD moved", opts: func(st setup) AppendOptions { return AppendOptions{ExpectParent: st.mid.ID} }, want: ErrConflict},
		{name: "an unknown parent", opts: func(setup) AppendOptions { return AppendOptions{ExpectParent: uuid.Must(uuid.NewV7())} }, want: ErrConflict},
		{name: "a root expected in a session with events", opts: func(setup) AppendOptions { return AppendOptions{ExpectRoot: true} }, want: ErrConflict},
		{name: "the Branch selection as expected", branch: func(st setup) uuid.UUID { return st.root.ID },
			opts:   func(st setup) AppendOptions { return AppendOptions{ExpectParent: st.root.ID} },
			parent: func(st setup) uuid.UUID { return st.root.ID }},
		{name: "HEAD expected while a Branch selection is pending", branch: func(st setup) uuid.UUID { return st.root.ID },
			opts: func(st setup) AppendOptions { return AppendOptions{ExpectParent: st.head.ID} }, want: ErrConflict},
		{name: "both ExpectRoot and ExpectParent", opts: func(st setup) AppendOptions { return AppendOptions{ExpectRoot: true, ExpectParent: st.head.ID} }, want: ErrInvalidEvent},
		{name: "no expectation", opts: func(setup) AppendOptions { return AppendOptions{} },
			parent: func(st setup) uuid.UUID { return st.head.ID }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s, _ := apiNewStore(t, nil)
			session := apiNewSession(t, s)
			var st setup
			st.root = apiAppend(t, s, session, UserText("root"))
			st.mid = apiAppend(t, s, session, AssistantText("mid"))
			st.head = apiAppend(t, s, session, UserText("head"))
			if tc.branch != nil {
				require.NoError(t, s.Branch(ctx, session, tc.branch(st)))
			}
			tree := apiTree(t, s, session)
			parentBefore, branchingBefore, err := s.NextParent(ctx, session)
			require.NoError(t, err)

			got, err := s.AppendWith(ctx, session, tc.opts(st), AssistantText("new"))
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				assert.Nil(t, got)
				apiSameNodes(t, tree, apiTree(t, s, session))
				parent, branching, err := s.NextParent(ctx, session)
				require.NoError(t, err)
				assert.Equal(t, parentBefore, parent, "the next parent is unchanged")
				assert.Equal(t, branchingBefore, branching, "a pending selection stays pending")
				return
			}
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, tc.parent(st), got[0].ParentID)
			assert.Equal(t, got[0].ID, apiHead(t, s, session))
		})
	}
}

func TestAppendWithExpectRootEmptySession(t *testing.T) {
	ctx := t.Context()
	s, _ := apiNewStore(t, nil)
	session := apiNewSession(t, s)
	got, err := s.AppendWith(ctx, session, AppendOptions{ExpectRoot: true}, UserText("first"))
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, uuid.Nil, got[0].ParentID)
	_, err = s.AppendWith(ctx, session, AppendOptions{ExpectRoot: true}, UserText("second first"))
	require.ErrorIs(t, err, ErrConflict, "a second writer racing for the first event loses")
	assert.Len(t, apiTree(t, s, session), 1)
}

// TestAppendWithRetryAfterHeadMoved: the idempotency check comes before
// the parent check, so a retry whose original moved HEAD gets the stored
// event; a retry stating another parent than the stored one conflicts.
func TestAppendWithRetryAfterHeadMoved(t *testing.T) {
	ctx := t.Context()
	s, _ := apiNewStore(t, nil)
	session := apiNewSession(t, s)
	root := apiAppend(t, s, session, UserText("root"))
	id := uuid.Must(uuid.NewV7())
	ev := rtWithID(AssistantText("answer"), id)
	first, err := s.AppendWith(ctx, session, AppendOptions{ExpectParent: root.ID}, ev)
	require.NoError(t, err)
	apiAppend(t, s, session, UserText("next"))

	again, err := s.AppendWith(ctx, session, AppendOptions{ExpectParent: root.ID}, ev)
	require.NoError(t, err)
	apiSameEvents(t, first, again)

	_, err = s.AppendWith(ctx, session, AppendOptions{ExpectParent: id}, ev)
	require.ErrorIs(t, err, ErrConflict, "stored as a child of root, not of itself")
	_, err = s.AppendWith(ctx, session, AppendOptions{ExpectRoot: true}, ev)
	require.ErrorIs(t, err, ErrConflict, "stored as a child of root, not as a root")
	assert.Len(t, apiTree(t, s, session), 3)
}

func TestAppendWithBatchIDs(t *testing.T) {
	ctx := t.Context()
	newIDs := func(n int) []uuid.UUID {
		out := make([]uuid.UUID, n)
		for i := range out {
			out[i] = uuid.Must(uuid.NewV7())
		}
		return out
	}
	batchOf := func(ids []uuid.UUID) []Event {
		evs := []Event{AssistantText("calling two tools"), ivCall("c1"), ivCall("c2")}
		for i := range evs {
			evs[i].ID = ids[i]
		}
		return evs
	}

	t.Run("retry of a whole batch", func(t *testing.T) {
		s, _ := apiNewStore(t, nil)
		session := apiNewSession(t, s)
		ids := newIDs(3)
		first, err := s.AppendBatch(ctx, session, batchOf(ids)...)
		require.NoError(t, err)
		assert.Equal(t, ids, apiIDs(first))
		again, err := s.AppendBatch(ctx, session, batchOf(ids)...)
		require.NoError(t, err)
		apiSameEvents(t, first, again)
		assert.Len(t, apiTree(t, s, session), 3)
	})
	t.Run("part of the batch stored", func(t *testing.T) {
		s, _ := apiNewStore(t, nil)
		session := apiNewSession(t, s)
		ids := newIDs(3)
		evs := batchOf(ids)
		stored, err := s.AppendBatch(ctx, session, evs[:2]...)
		require.NoError(t, err)
		_, err = s.AppendBatch(ctx, session, evs...)
		require.ErrorIs(t, err, ErrConflict)
		assert.Contains(t, err.Error(), ids[2].String(), "names the event not stored")
		assert.Len(t, apiTree(t, s, session), 2, "nothing written")
		// The way out the error names: the rest, under the last stored.
		rest, err := s.AppendWith(ctx, session, AppendOptions{ExpectParent: stored[1].ID}, evs[2:]...)
		require.NoError(t, err)
		assert.Equal(t, ids[2], rest[0].ID)
		assert.Equal(t, stored[1].ID, rest[0].ParentID)
		again, err := s.AppendBatch(ctx, session, evs...)
		require.NoError(t, err, "now the whole batch is stored")
		apiSameEvents(t, append(stored, rest...), again)
	})
	t.Run("stored events of another batch order", func(t *testing.T) {
		s, _ := apiNewStore(t, nil)
		session := apiNewSession(t, s)
		ids := newIDs(3)
		evs := batchOf(ids)
		for _, i := range []int{0, 2, 1} {
			apiAppend(t, s, session, evs[i])
		}
		_, err := s.AppendBatch(ctx, session, evs...)
		require.ErrorIs(t, err, ErrConflict, "stored, but not as this chain")
		assert.Len(t, apiTree(t, s, session), 3)
	})
	t.Run("an event without an id beside stored ones", func(t *testing.T) {
		s, _ := apiNewStore(t, nil)
		session := apiNewSession(t, s)
		ids := newIDs(3)
		evs := batchOf(ids)
		_, err := s.AppendBatch(ctx, session, evs...)
		require.NoError(t, err)
		evs[2].ID = uuid.Nil
		_, err = s.AppendBatch(ctx, session, evs...)
		require.ErrorIs(t, err, ErrConflict)
		assert.Len(t, apiTree(t, s, session), 3)
	})
	t.Run("repeated ids", func(t *testing.T) {
		s, _ := apiNewStore(t, nil)
		session := apiNewSession(t, s)
		ids := newIDs(3)
		ids[2] = ids[0]
		_, err := s.AppendBatch(ctx, session, batchOf(ids)...)
		require.ErrorIs(t, err, ErrInvalidEvent)
		assert.Empty(t, apiTree(t, s, session))
	})
	t.Run("mixed ids, none stored", func(t *testing.T) {
		s, _ := apiNewStore(t, nil)
		session := apiNewSession(t, s)
		ids := newIDs(3)
		evs := batchOf(ids)
		evs[1].ID = uuid.Nil
		out, err := s.AppendBatch(ctx, session, evs...)
		require.NoError(t, err)
		assert.Equal(t, ids[0], out[0].ID)
		assert.NotEqual(t, uuid.Nil, out[1].ID)
		assert.Equal(t, ids[2], out[2].ID)
		assert.Equal(t, out[1].ID, out[2].ParentID)
	})
	t.Run("stored on another branch", func(t *testing.T) {
		s, _ := apiNewStore(t, nil)
		session := apiNewSession(t, s)
		root := apiAppend(t, s, session, UserText("root"))
		id := uuid.Must(uuid.NewV7())
		first := apiAppend(t, s, session, rtWithID(AssistantText("on branch a"), id))
		require.NoError(t, s.Branch(ctx, session, root.ID))
		apiAppend(t, s, session, AssistantText("on branch b"))
		got, err := s.Append(ctx, session, rtWithID(AssistantText("on branch a"), id))
		require.NoError(t, err, "an id on another branch is in the session")
		apiSameEvent(t, first, got)
		assert.Equal(t, 1, rtCount(t, s, session, id))
	})
}

// TestAppendRetryConcurrent: many goroutines append the same event under
// one id at once (a retry racing its original), among appends without
// ids: one event is stored and every call returns it; a racer with other
// content gets ErrConflict or wins, never a second event.
// The blob variant stores records as blobs, whose writing releases the
// session's mutex between the two runs of the check.
func TestAppendRetryConcurrent(t *testing.T) {
	for _, blob := range []bool{false, true} {
		t.Run(fmt.Sprint("blob: ", blob), func(t *testing.T) { rtConcurrent(t, blob) })
	}
}

func rtConcurrent(t *testing.T, blob bool) {
	ctx := t.Context()
	pad := ""
	opts := &Options{}
	if blob {
		opts.BlobThreshold, pad = 64, strings.Repeat(" padding", 20)
	}
	s, _ := apiNewStore(t, opts)
	session := apiNewSession(t, s)
	apiAppend(t, s, session, UserText("start"))
	const rounds, racers = 20, 6
	for round := range rounds {
		id := uuid.Must(uuid.NewV7())
		ev := rtWithID(AssistantText(fmt.Sprint("answer ", round, pad)), id)
		other := rtWithID(AssistantText(fmt.Sprint("other answer ", round, pad)), id)
		got := make([]Event, racers)
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for r := range racers {
			wg.Go(func() {
				e := ev
				if r == racers-1 {
					e = other
				}
				got[r], errs[r] = s.Append(ctx, session, e)
			})
		}
		wg.Go(func() { _, _ = s.Append(ctx, session, UserText("unrelated")) })
		wg.Wait()
		require.Equal(t, 1, rtCount(t, s, session, id), "round %d: one event", round)
		stored, err := s.Event(ctx, session, id)
		require.NoError(t, err)
		for r := range racers {
			if errs[r] != nil {
				require.ErrorIs(t, errs[r], ErrConflict, "round %d racer %d", round, r)
				continue
			}
			assert.Equal(t, stored.ID, got[r].ID)
			assert.Equal(t, stored.Time, got[r].Time, "round %d racer %d: the stored event", round, r)
			assert.Equal(t, stored.Digest, got[r].Digest, "round %d racer %d", round, r)
			if !blob {
				assert.Equal(t, string(stored.Record), string(got[r].Record), "round %d racer %d", round, r)
			} else {
				assert.NotEmpty(t, stored.Digest, "stored as a blob")
			}
		}
	}
}

// rtGate blocks the first sync of a chunk file until released, and tells
// when it is reached.
type rtGate struct {
	once    sync.Once
	reached chan struct{}
	release chan struct{}
	fail    error // returned by the gated sync
	armed   bool
	mu      sync.Mutex
}

func (g *rtGate) hook(op vfs.Op, path string) error {
	g.mu.Lock()
	armed := g.armed
	g.mu.Unlock()
	if !armed || op != vfs.OpSync || !strings.Contains(path, string(filepath.Separator)+chunksDir+string(filepath.Separator)) {
		return nil
	}
	var fired bool
	g.once.Do(func() { fired = true })
	if !fired {
		return nil
	}
	close(g.reached)
	<-g.release
	return g.fail
}

// TestAppendRetryWaitsForInFlight: a retry that arrives while its original
// is being synced waits for that sync. When the sync succeeds it returns
// the original's event; when it fails, the retry must not report success
// for an event that is not durable.
func TestAppendRetryWaitsForInFlight(t *testing.T) {
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test fails, cuts or checks.
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprint("sync fails: ", fail), func(t *testing.T) {
			ctx := t.Context()
			m := vfs.NewMemFS()
			g := &rtGate{reached: make(chan struct{}), release: make(chan struct{})}
			if fail {
				g.fail = errors.New("injected sync failure")
			}
			m.SetFault(g.hook)
			s := apiOpen(t, memRoot, &Options{JournalSize: -1, fs: m})
			var releaseOnce sync.Once
			release := func() { releaseOnce.Do(func() { close(g.release) }) }
			t.Cleanup(release) // before Close, which waits for the original
			session := apiNewSession(t, s)
			apiAppend(t, s, session, UserText("start"))
			g.mu.Lock()
			g.armed = true
			g.mu.Unlock()

			id := uuid.Must(uuid.NewV7())
			ev := rtWithID(AssistantText("answer"), id)
			type result struct {
				ev  Event
				err error
			}
			orig, retry := make(chan result, 1), make(chan result, 1)
			go func() { e, err := s.Append(ctx, session, ev); orig <- result{e, err} }()
			reached(t, g.reached, "the original's sync")
			go func() { e, err := s.Append(ctx, session, ev); retry <- result{e, err} }()
			select {
			case r := <-retry:
				t.Fatalf("the retry returned (%v, %v) while its original was in flight", r.ev.ID, r.err)
			case <-waitSyncers(s, session, 1):
			case <-time.After(30 * time.Second):
				t.Fatal("the retry did not wait for its original's sync in 30s")
			}
			release()
			o, r := <-orig, <-retry
			if !fail {
				require.NoError(t, o.err)
				require.NoError(t, r.err)
				apiSameEvent(t, o.ev, r.ev)
				assert.Equal(t, 1, rtCount(t, s, session, id))
				return
			}
			require.Error(t, o.err)
			require.Error(t, r.err, "no success for an event whose sync failed")
			assert.ErrorIs(t, r.err, ErrSessionFailed)
		})
	}
}

// waitSyncers returns a channel closed once n calls wait for a sync of the
// session (the retry parked on its original).
func waitSyncers(s *Store, session uuid.UUID, n int) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for {
			h := s.reg.lookup(session)
			if h != nil {
				h.mu.Lock()
				w := h.pipe.Waiting()
				h.mu.Unlock()
				if w >= n {
					return
				}
			}
			runtime.Gosched()
		}
	}()
	return ch
}

// TestAppendRetryAfterFailedWrite: the original's write fails and is cut
// back (the session goes on writing); the retry then writes the event
// itself, once.
func TestAppendRetryAfterFailedWrite(t *testing.T) {
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test fails, cuts or checks.
	ctx := t.Context()
	m := vfs.NewMemFS()
	s := apiOpen(t, memRoot, &Options{JournalSize: -1, fs: m})
	session := apiNewSession(t, s)
	apiAppend(t, s, session, UserText("start"))
	f := vfs.FailNth(1, errors.New("injected write failure"), vfs.OpWrite)
	m.SetFault(f.Hook)
	id := uuid.Must(uuid.NewV7())
	ev := rtWithID(AssistantText("answer"), id)
	_, err := s.Append(ctx, session, ev)
	require.Error(t, err)
	require.True(t, f.Fired())
	got, err := s.Append(ctx, session, ev)
	require.NoError(t, err)
	assert.Equal(t, id, got.ID)
	assert.Equal(t, 1, rtCount(t, s, session, id))
}

// TestAppendRetryAfterReopen: the retry comes to another Store of the
// root, after Close; the session opens without its index (lazy), and the
// id lookup loads it. The stored event is found however deep it is.
func TestAppendRetryAfterReopen(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := apiOpen(t, dir, nil)
	session := apiNewSession(t, s)
	id := uuid.Must(uuid.NewV7())
	ev := rtWithID(AssistantText("answer"), id)
	apiAppend(t, s, session, UserText("start"))
	first := apiAppend(t, s, session, ev)
	var last Event
	for i := range 50 {
		last = apiAppend(t, s, session, UserText(fmt.Sprint("later ", i)))
	}
	require.NoError(t, s.Close())

	s2 := apiOpen(t, dir, nil)
	_, err := s2.AppendWith(ctx, session, AppendOptions{ExpectParent: first.ID}, UserText("stale"))
	require.ErrorIs(t, err, ErrConflict, "a lazy session checks the expected parent too")
	_, err = s2.AppendWith(ctx, session, AppendOptions{ExpectParent: last.ID}, UserText("a lazy append, without the index"))
	require.NoError(t, err)
	h := s2.reg.lookup(session)
	require.NotNil(t, h)
	h.mu.Lock()
	lazy := h.Partial || h.headEntry != nil
	h.mu.Unlock()
	require.True(t, lazy, "the session appends without its index")
	got, err := s2.Append(ctx, session, ev)
	require.NoError(t, err)
	apiSameEvent(t, first, got)
	_, err = s2.Append(ctx, session, rtWithID(AssistantText("changed"), id))
	require.ErrorIs(t, err, ErrConflict)
	assert.Equal(t, 1, rtCount(t, s2, session, id))
	assert.Len(t, apiTree(t, s2, session), 53)
}

// TestAppendRetryAfterCrash: the original append is cut by a power loss
// at every mutating operation it makes (a sample by default), and each
// crash state is reopened and the append retried: the event is stored
// exactly once, under its id, a child of the event before it, and a
// second retry returns it unchanged. When the original was acknowledged
// before the crash, the retry returns the very event acknowledged.
//
// SESSIONSTORE_CRASH_STATES=all tries every operation in every crash mode.
func TestAppendRetryAfterCrash(t *testing.T) {
	t.Parallel() // CPU-bound on MemFS instances of its own
	ctx := t.Context()
	session := uuid.Must(uuid.NewV7())
	id := uuid.Must(uuid.NewV7())
	ev := rtWithID(AssistantText("the answer"), id)
	// run appends the prelude, then the event, with the power failing at
	// the k-th mutating operation after the prelude (0: never).
	run := func(k int) (m *vfs.MemFS, acked *Event, prev Event, ops int) {
		m = vfs.NewMemFS()
		s, err := Open(memRoot, &Options{fs: m})
		require.NoError(t, err)
		_, err = s.Create(ctx, Meta{ID: session, Name: "retry"})
		require.NoError(t, err)
		prev, err = s.Append(ctx, session, UserText("question"))
		require.NoError(t, err)
		n := 0
		m.SetFault(func(op vfs.Op, _ string) error {
			if !vfs.Mutating(op) {
				return nil
			}
			if n++; n == k {
				return vfs.ErrPowerLoss
			}
			return nil
		})
		if got, err := s.Append(ctx, session, ev); err == nil {
			acked = &got
		}
		_ = s.Close() // checkpoints, unless the power is off
		m.PowerOff()
		return m, acked, prev, n
	}
	_, _, _, total := run(0)
	require.Greater(t, total, 1, "the append and the close write")
	points := testSize(t, "SESSIONSTORE_CRASH_STATES", 4, total)
	modes := vfs.CrashModes
	if points < total {
		modes = []vfs.CrashMode{vfs.KeepSynced, vfs.KeepAll}
	}
	var sawAcked, sawLost bool
	for i := range points {
		k := 1 + i*total/points
		m, acked, prev, _ := run(k)
		for j, mode := range modes {
			c := m.CrashClone(mode, uint64(k*100+j))
			s2 := openMem(t, c, Options{})
			got, err := s2.Append(ctx, session, ev)
			require.NoError(t, err, "crash at op %d, %s", k, mode)
			assert.Equal(t, id, got.ID)
			assert.Equal(t, prev.ID, got.ParentID, "crash at op %d, %s", k, mode)
			if acked != nil {
				sawAcked = true
				apiSameEvent(t, *acked, got)
				assert.Equal(t, acked.Time, got.Time, "crash at op %d, %s: the acknowledged event", k, mode)
			} else {
				sawLost = true
			}
			again, err := s2.Append(ctx, session, ev)
			require.NoError(t, err)
			apiSameEvent(t, got, again)
			assert.Equal(t, 1, rtCount(t, s2, session, id), "crash at op %d, %s", k, mode)
			require.NoError(t, s2.Close())
		}
	}
	assert.True(t, sawAcked || sawLost)
	if points == total {
		assert.True(t, sawAcked && sawLost, "every crash point covers both outcomes")
	}
}

// TestAppendRetryRemoteHandoff: with Options.Remote, a retry sent to
// another Store (another machine) after the first one released the
// session finds the event in the log on object storage.
func TestAppendRetryRemoteHandoff(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	m, err := a.Create(ctx, Meta{Name: "handoff"})
	require.NoError(t, err)
	apiAppend(t, a, m.ID, textEv("start"))
	id := uuid.Must(uuid.NewV7())
	ev := rtWithID(textEv("the answer"), id)
	first := apiAppend(t, a, m.ID, ev)
	require.NoError(t, a.CloseSession(ctx, m.ID))

	b, _ := apiNewStore(t, remoteOpts(obj))
	got, err := b.Append(ctx, m.ID, ev)
	require.NoError(t, err)
	apiSameEvent(t, first, got)
	assert.Equal(t, first.Time, got.Time)
	_, err = b.Append(ctx, m.ID, rtWithID(textEv("another answer"), id))
	require.ErrorIs(t, err, ErrConflict)
	_, err = b.AppendWith(ctx, m.ID, AppendOptions{ExpectParent: first.ParentID}, textEv("stale"))
	require.ErrorIs(t, err, ErrConflict, "HEAD is the event, not its parent")
	assert.Equal(t, []string{"start", "the answer"}, loadTexts(t, b, m.ID))
	require.NoError(t, b.Close())

	c, _ := apiNewStore(t, remoteOpts(obj))
	got, err = c.Append(ctx, m.ID, ev)
	require.NoError(t, err)
	apiSameEvent(t, first, got)
	assert.Equal(t, []string{"start", "the answer"}, loadTexts(t, c, m.ID))
}

// TestAppendCallerIDReadOnly: a read-only store refuses an append with a
// caller id as any other, and writes nothing.
func TestAppendCallerIDReadOnly(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := apiOpen(t, dir, nil)
	session := apiNewSession(t, s)
	id := uuid.Must(uuid.NewV7())
	ev := rtWithID(UserText("hello"), id)
	apiAppend(t, s, session, ev)
	require.NoError(t, s.Close())
	files := apiFiles(t, dir)

	r := apiOpen(t, dir, &Options{ReadOnly: true})
	_, err := r.Append(ctx, session, ev)
	require.ErrorIs(t, err, ErrReadOnly)
	_, err = r.AppendWith(ctx, session, AppendOptions{ExpectRoot: true}, rtWithID(UserText("new"), uuid.Must(uuid.NewV7())))
	require.ErrorIs(t, err, ErrReadOnly)
	require.NoError(t, r.Close())
	assert.Equal(t, files, apiFiles(t, dir))
}
