package sessionstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestReviewPrevForkPrefixAfterParentReencrypt: a fork open in a Store
// keeps its prefix (h.fork, resolved once) with the parent's index
// entries as they were; Reencrypt of the parent seals the parent's
// previews again under a new generation and drops the old one from the
// key record, so the fork's cached prefix holds previews under a
// generation the parent's key no longer has: the fork's Tree shows its
// prefix without previews until the fork is closed and opened again.
// Bug: fork.go prefixNodes/segPreviews open the cached prefix entries'
// previews with the parent's current key; nothing refreshes h.fork (nor
// keeps the old generation) when the parent is re-encrypted.
func TestReviewPrevForkPrefixAfterParentReencrypt(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{Keys: testKeys(t, "local:1", 7)})
	defer s.Close()
	p, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	var last Event
	for i := range 3 {
		last, err = s.Append(ctx, p.ID, UserText(secret(i)))
		require.NoError(t, err)
	}
	require.NoError(t, s.Flush(ctx, p.ID)) // the parent's index lines written (TestReviewPrevForkOfUnflushedParent)
	f, err := s.Fork(ctx, p.ID, last.ID)
	require.NoError(t, err)
	_, err = s.Append(ctx, f.ID, UserText(secret(7)))
	require.NoError(t, err)
	want := []string{secret(0), secret(1), secret(2), secret(7)}
	require.Equal(t, want, treePreviews(t, s, f.ID), "precondition")

	require.NoError(t, s.Reencrypt(ctx, p.ID))
	require.Equal(t, want[:3], treePreviews(t, s, p.ID), "precondition: the parent's own previews sealed again")
	assert.Equal(t, want, treePreviews(t, s, f.ID), "the fork's prefix previews after the parent's Reencrypt")
}

// TestReviewPrevReadOnlyTail: a read-only Store that holds an encrypted
// session's index reads the events appended after it (readTail) from
// the chunk lines, whose entries carry no sealed preview, so the new
// events have no preview in its Tree for as long as it holds the
// session, although their index lines hold them; a plain session's
// reader shows them (the chunk line makes the same preview). The web view
// (cmd/web, a read-only Store following a live session) hits this.
// Cause: readonly.go readTail (scanChunk, lines 320 and 331) indexes a
// plain chunk's new records with eventline.NewEntry, not from index.jsonl.
func TestReviewPrevReadOnlyTail(t *testing.T) {
	ctx := context.Background()
	for _, enc := range []bool{false, true} {
		m := vfs.NewMemFS()
		o := Options{}
		if enc {
			o.Keys = testKeys(t, "local:1", 7)
		}
		w := openMem(t, m, o)
		meta, err := w.Create(ctx, Meta{})
		require.NoError(t, err)
		require.Equal(t, enc, meta.Encrypted)
		_, err = w.Append(ctx, meta.ID, UserText(secret(0)))
		require.NoError(t, err)
		require.NoError(t, w.Flush(ctx, meta.ID))
		ro := o
		ro.ReadOnly = true
		r := openMem(t, m, ro)
		require.Equal(t, []string{secret(0)}, treePreviews(t, r, meta.ID), "precondition, encrypted %v", enc)
		_, err = w.Append(ctx, meta.ID, UserText(secret(1)))
		require.NoError(t, err)
		require.NoError(t, w.Flush(ctx, meta.ID))
		want := []string{secret(0), secret(1)}
		require.Equal(t, want, treePreviews(t, w, meta.ID), "precondition: the writer's, encrypted %v", enc)
		assert.Equal(t, want, treePreviews(t, r, meta.ID), "the reader's, encrypted %v", enc)
		require.NoError(t, r.Close())
		require.NoError(t, w.Close())
	}
}

// TestReviewPrevForkOfUnflushedParent: the ordinary flow "append to a
// session, then Fork it" in one Store: the parent's index lines are not
// in index.jsonl yet (they are written at Flush or Close), so the fork's
// prefix is resolved (resolveFork: analyze) from the parent's chunk
// lines, whose entries carry no sealed preview, and the fork's Tree
// shows its whole prefix without previews; the prefix stays cached in the
// fork's open session (h.fork), so they stay missing after the parent's
// Flush too. A plain parent's fork shows them (the chunk line makes the
// same preview).
// Cause: fork.go resolveFork (analyze, line 124) takes the parent's
// unindexed tail from its chunk lines (recovery NewEntry), and prefix
// (line 169) keeps that prefix while the fork stays open.
func TestReviewPrevForkOfUnflushedParent(t *testing.T) {
	ctx := context.Background()
	for _, enc := range []bool{false, true} {
		o := Options{}
		if enc {
			o.Keys = testKeys(t, "local:1", 7)
		}
		s := openMem(t, vfs.NewMemFS(), o)
		p, err := s.Create(ctx, Meta{})
		require.NoError(t, err)
		require.Equal(t, enc, p.Encrypted)
		var last Event
		for i := range 3 {
			last, err = s.Append(ctx, p.ID, UserText(secret(i)))
			require.NoError(t, err)
		}
		f, err := s.Fork(ctx, p.ID, last.ID)
		require.NoError(t, err)
		want := []string{secret(0), secret(1), secret(2)}
		require.Equal(t, want, treePreviews(t, s, p.ID), "precondition: the parent's own, encrypted %v", enc)
		assert.Equal(t, want, treePreviews(t, s, f.ID), "the fork's prefix, encrypted %v", enc)
		require.NoError(t, s.Flush(ctx, p.ID))
		assert.Equal(t, want, treePreviews(t, s, f.ID), "the fork's prefix after the parent's Flush, encrypted %v", enc)
		require.NoError(t, s.Close())
	}
}

// TestReviewPrevReencryptCutShort: Reencrypt removes index.jsonl (step
// 1) before it rewrites the chunks; cut short there (here an I/O error on
// a chunk; a crash or a cancelled ctx alike), the next open rebuilds the
// index from the chunk lines, which carry no sealed preview, and the
// Reencrypt run again to finish it keeps what it found: every preview of
// the session's plain chunks is gone for good, though the call's
// contract is "a session that opens whole, as after a crash; calling
// Reencrypt again completes it". (A plain session's index rebuilt so
// gets its previews back: NewEntry makes them from the chunk lines.
// Upgrade and a compression conversion of an encrypted session, which
// run the same rewrite, lose them alike.)
// Cause: upgrade.go rewriteSession removes index.jsonl first; reencrypt
// keeps the entries' previews only in memory (resealer.chunk) until the
// new index.jsonl is written.
func TestReviewPrevReencryptCutShort(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{Keys: testKeys(t, "local:1", 7)}
	s := openMem(t, m, o)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	for i := range 3 {
		_, err := s.Append(ctx, meta.ID, UserText(secret(i)))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	s = openMem(t, m, o)
	want := treePreviews(t, s, meta.ID)
	require.Equal(t, []string{secret(0), secret(1), secret(2)}, want, "precondition")
	m.SetFault(func(op vfs.Op, path string) error {
		if vfs.Mutating(op) && strings.Contains(path, "/"+chunksDir+"/") {
			return errors.New("injected I/O error")
		}
		return nil
	})
	require.Error(t, s.Reencrypt(ctx, meta.ID), "precondition: cut short")
	m.SetFault(nil)
	require.NoError(t, s.Close())

	s = openMem(t, m, o)
	defer s.Close()
	require.NoError(t, s.Reencrypt(ctx, meta.ID))
	assert.Equal(t, want, treePreviews(t, s, meta.ID), "the previews after Reencrypt completed")
}

// TestReviewPrevRemoteOtherSite: in the remote mode a second Store (another
// machine) opening an encrypted session restores its active chunk from
// the object store and rebuilds its index.jsonl from the chunk lines
// (remote_restore.go rebuildDerived: eventline.NewEntry), which carry no
// sealed preview: every event of the active chunk has no preview there,
// for good (the index written holds none), while the writing site shows
// them. A plain session's second site shows them (the chunk line makes
// the same preview).
func TestReviewPrevRemoteOtherSite(t *testing.T) {
	ctx := context.Background()
	for _, enc := range []bool{false, true} {
		obj := newMemObjects()
		keys := testKeys(t, "local:1", 7)
		edit := func(o *Options) {
			if enc {
				o.Keys = keys
			}
		}
		a := memRemoteStore(t, obj, edit)
		meta, err := a.Create(ctx, Meta{})
		require.NoError(t, err)
		require.Equal(t, enc, meta.Encrypted)
		for i := range 3 {
			_, err := a.Append(ctx, meta.ID, UserText(secret(i)))
			require.NoError(t, err)
		}
		want := []string{secret(0), secret(1), secret(2)}
		require.Equal(t, want, treePreviews(t, a, meta.ID), "precondition: the writing site's, encrypted %v", enc)
		require.NoError(t, a.Close())
		b := memRemoteStore(t, obj, edit)
		assert.Equal(t, want, treePreviews(t, b, meta.ID), "the other site's, encrypted %v", enc)
	}
}

// TestReviewPrevSealedPreviewNotCanonical: DecodeIndex's contract is "the
// layout must be exactly the one AppendIndex writes", and a preview in
// clear with a control byte is rejected ("control byte in preview"); but
// a sealed_preview whose base64 holds a CR or LF byte (raw in a JSON
// string: not JSON at all) decodes, since encoding/base64 skips them even
// in Strict mode, so a line that no build wrote, and that other JSON
// readers reject, is taken for a good one (and re-encodes to other bytes).
// Cause: internal/eventline/preview.go sealedPreviewValue decodes with
// base64.StdEncoding.Strict() without checking the characters.
func TestReviewPrevSealedPreviewNotCanonical(t *testing.T) {
	var e eventline.Entry
	e.ID = uuid.Must(uuid.NewV7())
	e.Kind = eventline.KindMessage
	e.Role = eventline.RoleUser
	e.Time = time.Now().UnixNano()
	e.Size = 10
	e.Loc = eventline.Location{Chunk: 0, Offset: 0, Length: 200}
	var ok bool
	e.Preview, ok = eventline.SealedPreview(bytes.Repeat([]byte{0xab}, 40))
	require.True(t, ok)
	line := eventline.AppendIndex(nil, &e)
	good := line[:len(line)-1]
	_, err := eventline.DecodeIndex(good)
	require.NoError(t, err, "precondition: %s", good)

	at := bytes.Index(good, []byte(`"sealed_preview":"`)) + len(`"sealed_preview":"`) + 8
	obj := append([]byte{}, good[:len(good)-jsonl.SuffixLen]...)
	obj = append(obj, '}')
	obj = slices.Insert(obj, at, '\r')
	bad := jsonl.Seal(nil, obj)
	bad = bad[:len(bad)-1]
	require.NoError(t, jsonl.Verify(bad), "precondition: framed")
	require.False(t, json.Valid(bad), "precondition: not JSON")
	_, err = eventline.DecodeIndex(bad)
	assert.Error(t, err, "a sealed preview with a CR in its base64: %q", bad)
}
