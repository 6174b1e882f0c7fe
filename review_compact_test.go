package sessionstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/seam"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// getGateObjects holds, once armed, every Get of a log object numbered
// below `below`, until resume is closed: a reader that listed the log and
// read its newest objects is paused before it reads the older ones.
type getGateObjects struct {
	*memObjects
	prefix  string
	below   atomic.Uint64
	reached chan struct{}
	once    sync.Once
	resume  chan struct{}
}

func newGetGate(obj *memObjects, id uuid.UUID) *getGateObjects {
	return &getGateObjects{memObjects: obj, prefix: seam.LogPrefix(id), reached: make(chan struct{}), resume: make(chan struct{})}
}

func (g *getGateObjects) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if seq, ok := seam.ParseLogKey(g.prefix, key); ok && seq < g.below.Load() {
		g.once.Do(func() { close(g.reached) })
		<-g.resume
	}
	return g.memObjects.Get(ctx, key, off, n)
}

// logSeqs returns the numbers of session id's log objects of kind kind.
func logSeqs(t *testing.T, obj *memObjects, id uuid.UUID, kind string) []uint64 {
	var out []uint64
	for _, k := range logObjects(t, obj, id, kind, -1) {
		seq, _ := seam.ParseLogKey(seam.LogPrefix(id), k)
		out = append(out, seq)
	}
	return out
}

// TestReviewStaleReaderSkipsCompactedMarker: a reader (an open, or a
// follower's first look) lists the log while B holds it: the newest
// marker is B's open marker m, and B's newest objects include a seal
// record s. It reads the newest objects (s among them), then pauses
// before reading the older ones. Meanwhile B releases, C opens
// (CompactDue: B's release lies 64 past the last compaction) and
// compacts below B's release: m, B's seal records and meta objects, and
// A's release go (B's and A's data objects stay: the state names them).
// The reader resumes: m is gone, so it reads further back (past its first
// page: a full listing, taken after the compaction) and stops at the
// create marker (number 1, never deleted). Every object it found gone
// lies below s, so missingObject takes them for dead objects an earlier
// build deleted (the legacy rule) and reports nothing, and nothing asks
// whether the log moved. The view is the create marker's state plus A's
// data objects (A's lease is the create marker's); B's data objects stop
// it as another lease's late Creates.
//
//   - The open then fills the number the compaction freed (a gap of the
//     new listing), creates its marker after the true newest object,
//     passes CheckNewestLocked and holds the session with a state that
//     lacks every event B acknowledged: they are lost for good (claims 1
//     and 5).
//   - The follower shows the session without B's events (claim 5: a
//     silent cut), until a later look finds a new marker: its first look
//     (a Head) ends at A's last event.
func TestReviewStaleReaderSkipsCompactedMarker(t *testing.T) {
	for _, reader := range []string{"open", "follower"} {
		t.Run(reader, func(t *testing.T) { staleReaderSkipsCompactedMarker(t, reader) })
	}
}

func staleReaderSkipsCompactedMarker(t *testing.T, reader string) {
	ctx := context.Background()
	obj := newMemObjects()
	small := func(o *Options) { o.ChunkSize = 2 << 10 }
	a := memRemoteStore(t, obj, small)
	m, err := a.Create(ctx, Meta{Name: "compacted under a reader"})
	require.NoError(t, err)
	var want []string
	for i := range 40 {
		want = append(want, fmt.Sprintf("a%d", i))
		apiAppend(t, a, m.ID, textEv(want[len(want)-1]))
	}
	require.NoError(t, a.Close()) // its release lies below 64: B compacts nothing

	b := memRemoteStore(t, obj, small)
	var head uuid.UUID
	for i := range 30 {
		want = append(want, fmt.Sprintf("b%d %s", i, strings.Repeat("x", 300)))
		head = apiAppend(t, b, m.ID, textEv(want[len(want)-1])).ID
	}
	require.NoError(t, b.Flush(ctx, m.ID))
	seals := logSeqs(t, obj, m.ID, seam.KindSeal)
	opens := logSeqs(t, obj, m.ID, seam.KindOpen)
	require.NotEmpty(t, seals, "precondition: B sealed a chunk")
	s := seals[len(seals)-1]
	newest, _ := seam.ParseLogKey(seam.LogPrefix(m.ID), obj.keys(seam.LogPrefix(m.ID))[0])
	require.Less(t, opens[len(opens)-1], s)
	require.LessOrEqual(t, newest-s, uint64(15), "precondition: s is read with the newest objects")
	stall(t, b, m.ID) // B holds the session, idle

	// The reader lists the log and reads its newest objects, then pauses.
	gate := newGetGate(obj, m.ID)
	gate.below.Store(s)
	var r *Store
	if reader == "follower" {
		o, _ := followerOpts(gate)
		r = openMem(t, vfs.NewMemFS(), *o)
		t.Cleanup(func() { r.Close() })
	} else {
		r = memRemoteStore(t, obj, small, func(o *Options) { o.Remote = gate })
	}
	t.Cleanup(func() { // before r's Close: a failed precondition must not leave the reader held
		select {
		case <-gate.resume:
		default:
			close(gate.resume)
		}
	})
	type result struct {
		texts []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		if reader == "follower" {
			// Head, not Load: its first look is the paused read itself
			// (a Load reads the session again once it knows whether it
			// is encrypted, and that second read sees C's markers).
			h, err := r.Head(ctx, m.ID)
			done <- result{[]string{h.String()}, err}
			return
		}
		_, err := r.Append(ctx, m.ID, textEv("r0"))
		done <- result{nil, err}
	}()
	select {
	case <-gate.reached:
	case res := <-done:
		require.FailNow(t, "the reader did not pause", "%v", res.err)
	}

	// B releases; C opens and compacts below B's release, then closes.
	require.NoError(t, b.Close())
	c := memRemoteStore(t, obj, small)
	_, err = c.Load(ctx, m.ID)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NotContains(t, obj.keys(seam.LogPrefix(m.ID)), seam.LogKey(m.ID, opens[len(opens)-1]), "precondition: compaction deleted B's open marker")
	obj.advance(time.Second)

	close(gate.resume)
	res := <-done
	if reader == "follower" {
		require.NoError(t, res.err)
		assert.Equal(t, []string{head.String()}, res.texts, "the follower's first look ends at B's last event")
		evs, err := r.Load(ctx, m.ID)
		require.NoError(t, err)
		assert.Equal(t, firstWords(want), firstWords(eventTexts(evs)), "the follower sees every event appended before its call")
		return
	}
	if res.err == nil {
		want = append(want, "r0")
	}
	require.NoError(t, r.Close())
	fresh := memRemoteStore(t, obj)
	assert.Equal(t, firstWords(want), firstWords(loadTexts(t, fresh, m.ID)), "every acknowledged event, in order (the reader's open returned %v)", res.err)
}

// eventTexts returns the events' texts.
func eventTexts(evs []Event) []string {
	var out []string
	for _, e := range evs {
		var r struct{ Text string }
		_ = json.Unmarshal(e.Record, &r)
		out = append(out, r.Text)
	}
	return out
}

// firstWords returns each text's first word (the events' names).
func firstWords(texts []string) []string {
	out := make([]string, len(texts))
	for i, s := range texts {
		out[i], _, _ = strings.Cut(s, " ")
	}
	return out
}

// TestReviewFullListingSkipsNewObjects: an open lists the log's first
// page (ViewPage newest objects) while A holds the session; no marker is
// among them (A appended more than a page since its marker), so after
// reading the page it lists the whole log again and reads on below the
// page. Between the two listings A appended more (d0..d4, acknowledged),
// then stalled. The full listing names d0..d4, which ReadView never reads
// (it reads only below the first page): buildView skips them as objects
// not read ("!ok: continue"), so the view's state ends at the first
// page's newest while its NewestSeq is the full listing's. The open finds
// A idle past its lease, creates its marker after d4 with a state that
// lacks d0..d4, and passes CheckNewestLocked: d0..d4 are lost. (Not
// compaction's: the full-listing path predates it; compaction makes the
// path common, since a compacted log's first page holds no marker
// whenever the holder wrote more than a page.)
func TestReviewFullListingSkipsNewObjects(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a := memRemoteStore(t, obj)
	m, err := a.Create(ctx, Meta{Name: "grows under a reader"})
	require.NoError(t, err)
	var want []string
	for i := range 40 {
		want = append(want, fmt.Sprintf("a%d", i))
		apiAppend(t, a, m.ID, textEv(want[len(want)-1]))
	}
	newest, _ := seam.ParseLogKey(seam.LogPrefix(m.ID), obj.keys(seam.LogPrefix(m.ID))[0])

	gate := newGetGate(obj, m.ID)
	gate.below.Store(newest)
	r := memRemoteStore(t, obj, func(o *Options) { o.Remote = gate })
	t.Cleanup(func() {
		select {
		case <-gate.resume:
		default:
			close(gate.resume)
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := r.Append(ctx, m.ID, textEv("r0"))
		done <- err
	}()
	select {
	case <-gate.reached:
	case err := <-done:
		require.FailNow(t, "the reader did not pause", "%v", err)
	}
	for i := range 5 {
		want = append(want, fmt.Sprintf("d%d", i))
		apiAppend(t, a, m.ID, textEv(want[len(want)-1]))
	}
	stall(t, a, m.ID)
	obj.advance(time.Second) // A idle past its lease

	close(gate.resume)
	err = <-done
	if err == nil {
		want = append(want, "r0")
	}
	require.NoError(t, r.Close())
	fresh := memRemoteStore(t, obj)
	assert.Equal(t, want, loadTexts(t, fresh, m.ID), "every acknowledged event, in order (the open returned %v)", err)
}
