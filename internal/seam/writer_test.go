package seam

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memObjects is an object store in memory whose Create succeeds for
// exactly one caller per key; fail, when set, fails every call first.
type memObjects struct {
	mu   sync.Mutex
	objs map[string][]byte
	fail error
}

func newMemObjects() *memObjects { return &memObjects{objs: map[string][]byte{}} }

func (m *memObjects) Create(_ context.Context, key string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	if _, ok := m.objs[key]; ok {
		return ErrObjectExists
	}
	m.objs[key] = append([]byte(nil), data...)
	return nil
}

func (m *memObjects) Put(_ context.Context, key string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[key] = append([]byte(nil), data...)
	return nil
}

func (m *memObjects) Get(_ context.Context, key string, _, _ int64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[key]
	if !ok {
		return nil, ErrObjectNotFound
	}
	return append([]byte(nil), b...), nil
}

func (m *memObjects) Stat(_ context.Context, key string) (ObjectInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[key]
	if !ok {
		return ObjectInfo{}, ErrObjectNotFound
	}
	return ObjectInfo{Key: key, Size: int64(len(b))}, nil
}

func (m *memObjects) List(_ context.Context, prefix string, limit int) ([]ObjectInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ObjectInfo
	for k, b := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(b))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (m *memObjects) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, key)
	return nil
}

// holding returns a writer of session id that holds it after object seq.
func holding(obj Objects, id uuid.UUID, seq uint64) *LogWriter {
	return &LogWriter{Obj: obj, ID: id, Store: uuid.New(), Now: time.Now, Lease: uuid.New(), Seq: seq, State: &State{}, Holder: true}
}

// TestLogWriterFenced: a writer whose next object another writer created
// is fenced, for good, and writes nothing more; the other goes on.
func TestLogWriterFenced(t *testing.T) {
	ctx := context.Background()
	obj, id := newMemObjects(), uuid.New()
	a := holding(obj, id, 0)
	seq, err := a.PutLocked(ctx, &Header{Kind: KindCreate, State: &State{}}, []byte("{}"))
	require.NoError(t, err)
	require.Equal(t, uint64(1), seq)

	b := holding(obj, id, 1) // took the session after object 1
	_, err = b.PutLocked(ctx, &Header{Kind: KindOpen, State: &State{}}, []byte("{}"))
	require.NoError(t, err)

	_, err = a.PutLocked(ctx, &Header{Kind: KindData, Chunk: 1, Len: 1}, []byte("x"))
	assert.ErrorIs(t, err, ErrFenced)
	_, err = a.PutLocked(ctx, &Header{Kind: KindData, Chunk: 1, Len: 1}, []byte("y"))
	assert.ErrorIs(t, err, ErrFenced, "fenced for good")
	assert.Len(t, obj.objs, 2, "the fenced writer wrote nothing")

	seq, err = b.PutLocked(ctx, &Header{Kind: KindData, Chunk: 1}, []byte("z"))
	require.NoError(t, err)
	assert.Equal(t, uint64(3), seq)
	got, err := obj.Get(ctx, LogKey(id, 3), 0, -1)
	require.NoError(t, err)
	h, payload, err := DecodeObject(LogKey(id, 3), got)
	require.NoError(t, err)
	assert.Equal(t, b.Lease, h.Lease)
	assert.Equal(t, []byte("z"), payload)
}

// TestLogWriterRetriedCreate: an object that exists with exactly the
// bytes this writer creates (a retried Create whose answer was lost) is
// its own, not a fence.
func TestLogWriterRetriedCreate(t *testing.T) {
	ctx := context.Background()
	obj, id := newMemObjects(), uuid.New()
	w := holding(obj, id, 0)
	h := &Header{Kind: KindData, Chunk: 1, Lease: w.Lease, Store: w.Store}
	b, err := EncodeObject(h, []byte("x"))
	require.NoError(t, err)
	require.NoError(t, obj.Create(ctx, LogKey(id, 1), b))
	seq, err := w.PutLocked(ctx, &Header{Kind: KindData, Chunk: 1}, []byte("x"))
	require.NoError(t, err)
	assert.Equal(t, uint64(1), seq)
	assert.Len(t, w.State.Live, 1)
}

// TestLogWriterUnknown: a failed Create leaves the object's state
// unknown, and the writer writes nothing more; a writer that does not
// hold the session writes nothing.
func TestLogWriterUnknown(t *testing.T) {
	ctx := context.Background()
	obj, id := newMemObjects(), uuid.New()
	w := holding(obj, id, 0)
	boom := errors.New("unreachable")
	obj.fail = boom
	_, err := w.PutLocked(ctx, &Header{Kind: KindData, Chunk: 1}, []byte("x"))
	assert.ErrorIs(t, err, ErrRemote)
	assert.ErrorIs(t, err, boom)
	obj.fail = nil
	_, err = w.PutLocked(ctx, &Header{Kind: KindData, Chunk: 1}, []byte("x"))
	assert.ErrorIs(t, err, ErrRemote, "no more objects after an unknown one")
	assert.Empty(t, obj.objs)

	idle := holding(obj, id, 0)
	idle.Holder = false
	_, err = idle.PutLocked(ctx, &Header{Kind: KindData, Chunk: 1}, []byte("x"))
	assert.ErrorIs(t, err, ErrRemote)
	assert.Empty(t, obj.objs)
}

// TestLogWriterSealDying: a seal record makes the sealed chunk's data
// objects dead in the state and dying from now.
func TestLogWriterSealDying(t *testing.T) {
	ctx := context.Background()
	obj, id := newMemObjects(), uuid.New()
	w := holding(obj, id, 0)
	now := time.UnixMilli(1_700_000_000_000)
	w.Now = func() time.Time { return now }
	for _, c := range []uint32{1, 2, 1} {
		_, err := w.PutLocked(ctx, &Header{Kind: KindData, Chunk: c}, []byte("x"))
		require.NoError(t, err)
	}
	_, err := w.PutLocked(ctx, &Header{Kind: KindSeal, Chunk: 1, Key: "k", Size: 2}, nil)
	require.NoError(t, err)
	assert.Equal(t, []Dying{{Since: now, Seqs: []SeqRange{{From: 1, To: 1}, {From: 3, To: 3}}}}, w.Dying)
	assert.Equal(t, []SeqRange{{From: 1, To: 1, At: now.UnixMilli()}, {From: 3, To: 3, At: now.UnixMilli()}}, w.State.Dead)
	assert.Equal(t, []Piece{{Seq: 2, Chunk: 2, Len: 1}}, w.State.Live)
}
