package seam

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/corrupt"
)

// TestReadView: an open reads the log from its newest marker on: the
// state and metadata the marker holds, then the objects after it, past
// the first listed page when many came after the marker.
func TestReadView(t *testing.T) {
	ctx := context.Background()
	for _, after := range []int{0, 3, ViewPage + 7} {
		obj, id := newMemObjects(), uuid.New()
		w := holding(obj, id, 0)
		v, err := w.ReadView(ctx)
		require.NoError(t, err)
		assert.Nil(t, v, "no log")

		_, err = w.PutLocked(ctx, &Header{Kind: KindCreate, State: &State{}}, []byte(`{"m":0}`))
		require.NoError(t, err)
		_, err = w.PutLocked(ctx, &Header{Kind: KindData, Chunk: 0, Off: 0}, []byte("a\n"))
		require.NoError(t, err)
		_, err = w.PutLocked(ctx, &Header{Kind: KindOpen, State: w.State.Clone()}, []byte(`{"m":1}`))
		require.NoError(t, err)
		for i := range after {
			_, err = w.PutLocked(ctx, &Header{Kind: KindData, Chunk: 0, Off: int64(2 + 2*i)}, []byte("b\n"))
			require.NoError(t, err)
		}
		_, err = w.PutLocked(ctx, &Header{Kind: KindMeta}, []byte(`{"m":2}`))
		require.NoError(t, err)

		v, err = w.ReadView(ctx)
		require.NoError(t, err, "after %d", after)
		require.NotNil(t, v)
		assert.Equal(t, w.Seq, v.NewestSeq)
		assert.Equal(t, LogKey(id, w.Seq), v.Newest.Key)
		assert.Equal(t, KindMeta, v.NewestHead.Kind)
		assert.Equal(t, `{"m":2}`, string(v.Meta))
		assert.Equal(t, w.State.Live, v.State.Live, "the marker's state, then the objects after it")
		assert.Len(t, v.Payloads, after, "the data objects after the marker")
	}
}

// TestReadViewDamage: a log without a marker, and a damaged object among
// those read, are damage naming an object's key.
func TestReadViewDamage(t *testing.T) {
	ctx := context.Background()
	obj, id := newMemObjects(), uuid.New()
	w := holding(obj, id, 0)
	_, err := w.PutLocked(ctx, &Header{Kind: KindData, Chunk: 0}, []byte("a\n"))
	require.NoError(t, err)
	_, err = w.ReadView(ctx)
	var ce *corrupt.Error
	require.ErrorAs(t, err, &ce, "no marker")
	assert.Equal(t, LogKey(id, 1), ce.Path)

	_, err = w.PutLocked(ctx, &Header{Kind: KindOpen, State: &State{}}, []byte("{}"))
	require.NoError(t, err)
	b, err := obj.Get(ctx, LogKey(id, 2), 0, -1)
	require.NoError(t, err)
	b[len(b)-1] ^= 1
	require.NoError(t, obj.Put(ctx, LogKey(id, 2), b))
	_, err = w.ReadView(ctx)
	require.ErrorAs(t, err, &ce, "a flipped byte")
	assert.Equal(t, LogKey(id, 2), ce.Path)
}

// getHook is an Objects that runs hook once, before the first Get.
type getHook struct {
	Objects
	hook func()
}

func (g *getHook) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if h := g.hook; h != nil {
		g.hook = nil
		h()
	}
	return g.Objects.Get(ctx, key, off, n)
}

// TestReadViewTombstones: a tombstone (or a missing object) after the
// newest marker is damage naming its key, unless a seal record after it
// explains it; when the seal record came after the listing (another
// Store sealed and replaced the objects while the log was read), the read
// is ErrLogMoved, and reading again finds the log whole.
func TestReadViewTombstones(t *testing.T) {
	ctx := context.Background()
	build := func() (*memObjects, *LogWriter) {
		obj, id := newMemObjects(), uuid.New()
		w := holding(obj, id, 0)
		_, err := w.PutLocked(ctx, &Header{Kind: KindCreate, State: &State{}}, []byte(`{}`))
		require.NoError(t, err)
		for i := range 2 {
			_, err = w.PutLocked(ctx, &Header{Kind: KindData, Chunk: 0, Off: int64(2 * i)}, []byte("a\n"))
			require.NoError(t, err)
		}
		return obj, w
	}
	t.Run("while written", func(t *testing.T) {
		obj, w := build()
		r := &LogWriter{Obj: &getHook{Objects: obj, hook: func() {
			// Another Store seals chunk 0 and replaces its data objects.
			_, err := w.PutLocked(ctx, &Header{Kind: KindSeal, Chunk: 0, Key: "sealed", Size: 4}, nil)
			require.NoError(t, err)
			for seq := uint64(2); seq <= 3; seq++ {
				require.NoError(t, obj.Put(ctx, LogKey(w.ID, seq), Tombstone()))
			}
		}}, ID: w.ID}
		_, err := r.ReadView(ctx)
		require.ErrorIs(t, err, ErrLogMoved)
		v, err := r.ReadView(ctx)
		require.NoError(t, err, "read again")
		assert.Equal(t, []Sealed{{Chunk: 0, Key: "sealed", Size: 4}}, v.State.Sealed)
		assert.Empty(t, v.State.Live)
	})
	t.Run("unexplained", func(t *testing.T) {
		obj, w := build()
		require.NoError(t, obj.Put(ctx, LogKey(w.ID, 3), Tombstone()))
		_, err := w.ReadView(ctx)
		var ce *corrupt.Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, LogKey(w.ID, 3), ce.Path)
		assert.NotErrorIs(t, err, ErrLogMoved)
	})
}
