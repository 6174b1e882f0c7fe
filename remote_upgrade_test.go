package sessionstore

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/seam"
)

// setRemoteFormat rewrites every copy of session id's session.json in obj
// (the log's markers and meta records, the copies List reads) in format
// f, as a build of that format wrote them.
func setRemoteFormat(t *testing.T, obj *memObjects, id uuid.UUID, f int) {
	t.Helper()
	obj.mu.Lock()
	defer obj.mu.Unlock()
	reencode := func(key string, b []byte) []byte {
		m, _, err := decodeMeta(b, id, key)
		require.NoError(t, err)
		out, err := encodeMeta(m, f)
		require.NoError(t, err)
		return out
	}
	n := 0
	for _, k := range slices.Sorted(maps.Keys(obj.objs)) {
		o := obj.objs[k]
		switch {
		case strings.HasPrefix(k, seam.LogPrefix(id)):
			h, payload, err := seam.DecodeObject(k, o.data)
			require.NoError(t, err)
			if h.State == nil && h.Kind != seam.KindMeta {
				continue
			}
			o.data, err = seam.EncodeObject(h, reencode(k, payload))
			require.NoError(t, err)
		case strings.HasPrefix(k, metaPrefix+id.String()+"/"):
			o.data = reencode(k, o.data)
		default:
			continue
		}
		obj.objs[k] = o
		n++
	}
	require.Positive(t, n, "the session's metadata was rewritten")
}

// remoteFormat returns the format of session id as a Store restoring it
// from obj reads it.
func remoteFormat(t *testing.T, obj *memObjects, id uuid.UUID) int {
	t.Helper()
	s, err := Open(t.TempDir(), remoteOpts(obj))
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }() // releases the session
	h, err := s.reg.acquireLazy(context.Background(), id, nil)
	require.NoError(t, err)
	defer s.reg.release(h)
	return h.format
}

// TestRemoteUpgrade: Upgrade of a remote session of format 2 (as an
// earlier build made it) writes its session.json in format 3 to the
// object store, changing no event; every Store restoring it then reads
// format 3; Upgrade of a format 3 session writes nothing.
func TestRemoteUpgrade(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	m, err := a.Create(ctx, Meta{Name: "old"})
	require.NoError(t, err)
	for i := range 5 {
		apiAppend(t, a, m.ID, textEv(strings.Repeat("x", i)))
	}
	want, err := a.Load(ctx, m.ID)
	require.NoError(t, err)
	require.NoError(t, a.CloseSession(ctx, m.ID))
	setRemoteFormat(t, obj, m.ID, 2)
	require.Equal(t, 2, remoteFormat(t, obj, m.ID), "the session reads as format 2")

	b, _ := apiNewStore(t, remoteOpts(obj))
	require.NoError(t, b.Upgrade(ctx, m.ID))
	got, err := b.Load(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	require.NoError(t, b.CloseSession(ctx, m.ID))
	assert.Equal(t, formatVersion, remoteFormat(t, obj, m.ID), "restored in format 3")
	meta, err := b.Meta(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, "old", meta.Name)

	metas := metaRecords(t, obj, m.ID)
	require.Positive(t, metas, "the upgrade wrote a meta record")
	require.NoError(t, b.Upgrade(ctx, m.ID))
	require.NoError(t, b.CloseSession(ctx, m.ID))
	assert.Equal(t, metas, metaRecords(t, obj, m.ID), "a format 3 session: no metadata written")
}

// metaRecords counts the meta records of session id's log.
func metaRecords(t *testing.T, obj *memObjects, id uuid.UUID) int {
	t.Helper()
	n := 0
	for _, k := range obj.keys(seam.LogPrefix(id)) {
		b, err := obj.Get(context.Background(), k, 0, -1)
		require.NoError(t, err)
		h, _, err := seam.DecodeObject(k, b)
		require.NoError(t, err)
		if h.Kind == seam.KindMeta {
			n++
		}
	}
	return n
}
