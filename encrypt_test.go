package sessionstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/seal"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// testKeys returns a LocalKeys whose current key is id, made of the byte b.
func testKeys(t testing.TB, id string, b byte) *LocalKeys {
	t.Helper()
	k, err := NewLocalKeys(id, map[string][]byte{id: bytes.Repeat([]byte{b}, 32)})
	require.NoError(t, err)
	return k
}

// secret is a string the tests put into records and look for in files.
func secret(i int) string { return fmt.Sprintf("SECRET-%04d-do-not-store-in-clear", i) }

// bigOutput is a tool output over encOptions' blob threshold even
// compressed: secret(2) then hex of a hash chain.
func bigOutput() string {
	var b strings.Builder
	b.WriteString(secret(2))
	h := sha256.Sum256([]byte("seed"))
	for b.Len() < 100<<10 {
		b.WriteString(hex.EncodeToString(h[:]))
		h = sha256.Sum256(h[:])
	}
	return b.String()
}

// encOptions are Options of an encrypted store with keys, whose records
// over 16 KiB are blobs.
func encOptions(keys KeyProvider) Options {
	return Options{Keys: keys, BlobThreshold: 16 << 10}
}

// encryptedWorkload appends to a new encrypted session events of every
// kind of storage: inline records, one compressible enough to be
// compressed, one over the blob threshold, a compaction, a branch. It
// returns the session and the events as appended (records in clear).
func encryptedWorkload(t *testing.T, s *Store) (uuid.UUID, []Event) {
	t.Helper()
	ctx := context.Background()
	m, err := s.Create(ctx, Meta{Name: "encrypted"})
	require.NoError(t, err)
	require.True(t, m.Encrypted)
	var all []Event
	add := func(ev Event) Event {
		t.Helper()
		out, err := s.Append(ctx, m.ID, ev)
		require.NoError(t, err)
		all = append(all, out)
		return out
	}
	first := add(UserText(secret(0)))
	add(AssistantText(secret(1) + strings.Repeat(" compressible", 100)))
	big := add(ToolResultEvent(ToolResult{CallID: "c1", Output: bigOutput()}))
	require.NotEmpty(t, big.Digest, "a blob")
	c, err := s.Compact(ctx, m.ID, Compaction{Summary: Summary{Text: secret(3)}, Head: big.ID, FirstKept: big.ID})
	require.NoError(t, err)
	all = append(all, c)
	add(UserText(secret(4)))
	require.NoError(t, s.Branch(ctx, m.ID, first.ID))
	add(UserText(secret(5)))
	return m.ID, all
}

// recordsOf maps event ids to records, resolving blobs.
func recordsOf(t *testing.T, s *Store, session uuid.UUID, evs []Event) map[uuid.UUID]string {
	t.Helper()
	out := map[uuid.UUID]string{}
	for _, ev := range evs {
		if ev.Record == nil && ev.Digest != "" {
			var err error
			ev, err = s.Resolve(context.Background(), session, ev)
			require.NoError(t, err)
		}
		out[ev.ID] = string(ev.Record)
	}
	return out
}

// checkEncryptedReads reads session through every call that returns
// records and checks each record against want.
func checkEncryptedReads(t *testing.T, s *Store, session uuid.UUID, want []Event) {
	t.Helper()
	ctx := context.Background()
	byID := map[uuid.UUID]string{}
	for _, ev := range want {
		byID[ev.ID] = string(ev.Record)
	}
	check := func(what string, evs []Event) {
		t.Helper()
		require.NotEmpty(t, evs, what)
		for id, rec := range recordsOf(t, s, session, evs) {
			assert.Equal(t, byID[id], rec, "%s: event %s", what, id)
		}
	}
	loaded, err := s.Load(ctx, session)
	require.NoError(t, err)
	check("Load", loaded)
	full, err := s.FullPath(ctx, session, uuid.Nil)
	require.NoError(t, err)
	check("FullPath", full)
	leaf := want[len(want)-2].ID // the compacted branch's newest
	lp, err := s.LoadPath(ctx, session, leaf)
	require.NoError(t, err)
	check("LoadPath", lp)
	var seq []Event
	for ev, err := range s.LoadSeq(ctx, session) {
		require.NoError(t, err)
		seq = append(seq, ev)
	}
	check("LoadSeq", seq)
	seq = nil
	for ev, err := range s.FullPathSeq(ctx, session, leaf) {
		require.NoError(t, err)
		seq = append(seq, ev)
	}
	check("FullPathSeq", seq)
	var one []Event
	for _, w := range want {
		ev, err := s.Event(ctx, session, w.ID)
		require.NoError(t, err)
		one = append(one, ev)
	}
	check("Event", one)
	ab, err := s.Abandoned(ctx, session, want[0].ID)
	require.NoError(t, err)
	check("Abandoned", ab)
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	sub, err := s.SubscribeFrom(sctx, session, uuid.Nil)
	require.NoError(t, err)
	var got []Event
	for len(got) < len(want) {
		u, ok := <-sub.C
		require.True(t, ok, "the replay ended early: %v", sub.Err())
		if u.Event != nil {
			got = append(got, *u.Event)
		}
	}
	sub.Close()
	check("SubscribeFrom", got)
}

// TestEncryptedSession: every record of an encrypted session reads back
// as appended through every call that returns records, in the Store that
// wrote it and in a new one (the key unwrapped from its record), and the
// compaction's context is the one a plain session gets.
func TestEncryptedSession(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	keys := testKeys(t, "local:1", 7)
	o := encOptions(keys)
	s, err := Open(dir, &o)
	require.NoError(t, err)
	id, all := encryptedWorkload(t, s)
	checkEncryptedReads(t, s, id, all)
	require.NoError(t, s.Close())

	s, err = Open(dir, &o)
	require.NoError(t, err)
	defer s.Close()
	checkEncryptedReads(t, s, id, all)
	m, err := s.Meta(ctx, id)
	require.NoError(t, err)
	assert.True(t, m.Encrypted, "session.json says so")

	// The context Load gives: the compaction, the event it keeps, and the
	// later ones of the active branch.
	loaded, err := s.Load(ctx, id)
	require.NoError(t, err)
	var kinds []Kind
	for _, ev := range loaded {
		kinds = append(kinds, ev.Kind)
	}
	assert.Equal(t, []Kind{KindMessage, KindMessage}, kinds, "the branch from the first event: it and the new one")
	path, err := s.LoadPath(ctx, id, all[4].ID)
	require.NoError(t, err)
	require.Len(t, path, 3)
	assert.Equal(t, KindCompaction, path[0].Kind)
	c, err := path[0].Compaction()
	require.NoError(t, err)
	assert.Equal(t, secret(3), c.Summary.Text)
	assert.Equal(t, all[2].ID, path[1].ID, "FirstKept, read from the sealed compaction record")

	// A retry of a stored event with its id is the stored event; with
	// other content a conflict.
	again := UserText(secret(5))
	again.ID = all[len(all)-1].ID
	got, err := s.AppendWith(ctx, id, AppendOptions{}, again)
	require.NoError(t, err)
	assert.Equal(t, all[len(all)-1].ID, got[0].ID)
	assert.JSONEq(t, string(all[len(all)-1].Record), string(got[0].Record))
	other := UserText("other")
	other.ID = again.ID
	_, err = s.AppendWith(ctx, id, AppendOptions{}, other)
	assert.ErrorIs(t, err, ErrConflict)
	bigAgain := ToolResultEvent(ToolResult{CallID: "c1", Output: bigOutput()})
	bigAgain.ID = all[2].ID
	_, err = s.AppendWith(ctx, id, AppendOptions{}, bigAgain)
	assert.NoError(t, err, "a blob's retry compares the records, not the envelopes")

	// UpdateMeta cannot make it plain.
	m, err = s.UpdateMeta(ctx, id, func(m *Meta) { m.Encrypted = false })
	require.NoError(t, err)
	assert.True(t, m.Encrypted)

	r, err := s.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
}

// TestEncryptedNoPlaintextOnDisk: no file of an encrypted store holds a
// record's text, in the active chunks, sealed chunks, blobs or the
// index; the same workload in a plain store does (so the scan can fail).
func TestEncryptedNoPlaintextOnDisk(t *testing.T) {
	scan := func(dir string) []string {
		var found []string
		require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			require.NoError(t, err)
			if d.IsDir() {
				return nil
			}
			b, err := vfs.ReadFileLimit(vfs.Default, path, 64<<20)
			require.NoError(t, err)
			for i := range 6 {
				if bytes.Contains(b, []byte(secret(i))) {
					found = append(found, fmt.Sprintf("%s: %s", path, secret(i)))
				}
			}
			return nil
		}))
		return found
	}
	run := func(o Options) string {
		dir := t.TempDir()
		o.ChunkSize = 4 << 10 // several chunks, the older sealed
		// Sealed chunks uncompressed, so that compression does not hide
		// a record in clear from the scan.
		o.Compression = CompressionNone
		s, err := Open(dir, &o)
		require.NoError(t, err)
		ctx := context.Background()
		if o.Keys == nil {
			m, err := s.Create(ctx, Meta{})
			require.NoError(t, err)
			for i := range 6 {
				_, err := s.Append(ctx, m.ID, UserText(secret(i)+strings.Repeat(" pad", 300)))
				require.NoError(t, err)
			}
		} else {
			id, _ := encryptedWorkload(t, s)
			for i := range 30 { // fill chunks, so that some are sealed
				_, err := s.Append(ctx, id, UserText(fmt.Sprintf("%d %s", i, strings.Repeat("filler ", 100))))
				require.NoError(t, err)
			}
			require.NoError(t, s.Flush(ctx, id))
		}
		require.NoError(t, s.Close())
		return dir
	}
	plain := run(Options{})
	assert.NotEmpty(t, scan(plain), "the scan finds records stored in clear")
	enc := run(encOptions(testKeys(t, "local:1", 7)))
	chunks, err := filepath.Glob(filepath.Join(enc, sessionsDir, "*", chunksDir, "*"))
	require.NoError(t, err)
	require.Greater(t, len(chunks), 2, "the encrypted store has several chunks")
	assert.Empty(t, scan(enc))
}

// TestEncryptedKeyErrors: an encrypted session read or written without
// its key is a *KeyError naming the session (and the key the record
// names), matching ErrKeyUnavailable or ErrWrongKey, never sealed bytes
// or a corruption verdict, and nothing is written.
func TestEncryptedKeyErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := encOptions(testKeys(t, "local:1", 7))
	s, err := Open(dir, &o)
	require.NoError(t, err)
	id, _ := encryptedWorkload(t, s)
	require.NoError(t, s.Close())
	rev := func() Revision {
		r, err := Open(dir, &Options{ReadOnly: true})
		require.NoError(t, err)
		defer r.Close()
		v, err := r.Revision(ctx, id)
		require.NoError(t, err)
		return v
	}
	before := rev()

	for _, c := range []struct {
		name  string
		keys  KeyProvider
		want  error
		keyID string
	}{
		{"no provider", nil, ErrKeyUnavailable, ""},
		{"another key id", testKeys(t, "local:2", 7), ErrKeyUnavailable, "local:1"},
		{"another key of the same id", testKeys(t, "local:1", 8), ErrWrongKey, "local:1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(dir, &Options{Keys: c.keys})
			require.NoError(t, err)
			defer s.Close()
			_, err = s.Load(ctx, id)
			var ke *KeyError
			require.ErrorAs(t, err, &ke)
			assert.Equal(t, id, ke.Session)
			assert.Equal(t, c.keyID, ke.KeyID)
			assert.ErrorIs(t, err, c.want)
			assert.NotErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), id.String())
			_, err = s.Append(ctx, id, UserText("x"))
			assert.ErrorAs(t, err, &ke)
			for ev, err := range s.LoadSeq(ctx, id) {
				assert.ErrorAs(t, err, &ke, "LoadSeq: %v", ev.ID)
			}
		})
	}
	assert.Equal(t, before, rev(), "nothing was written")
}

// TestEncryptedEnvelopeDamage: an envelope that does not open under the
// right key (a character of it changed, the line's checksum made to
// match) is damage, a *CorruptionError, not a key error; one copied into
// another session does not open there either.
func TestEncryptedEnvelopeDamage(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	keys := testKeys(t, "local:1", 7)
	o := Options{Keys: keys, Compression: CompressionNone}
	s := openMem(t, m, o)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	ev, err := s.Append(ctx, meta.ID, UserText(secret(0)))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	chunkPath := sessionPath(meta.ID, filepath.Join(chunksDir, chunkName(0)))
	chunk, err := vfs.ReadFile(m, chunkPath)
	require.NoError(t, err)
	chunk = bytes.TrimRight(chunk, "\x00")
	i := bytes.Index(chunk, []byte(`"record":"`))
	require.Positive(t, i)
	at := i + len(`"record":"`) + 20
	body := bytes.Clone(chunk[:len(chunk)-1-jsonl.SuffixLen])
	if body[at] == 'A' {
		body[at] = 'B'
	} else {
		body[at] = 'A'
	}
	resealed := jsonl.Seal(nil, append(body, '}'))
	require.Len(t, resealed, len(chunk))
	writeMemFile(t, m, chunkPath, resealed)

	s = openMem(t, m, o)
	defer s.Close()
	_, err = s.Event(ctx, meta.ID, ev.ID)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	var ke *KeyError
	assert.False(t, errors.As(err, &ke))

	// An envelope of one session is not another's.
	k1, err := s.recordKey(ctx, meta.ID)
	require.NoError(t, err)
	other, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	k2, err := s.recordKey(ctx, other.ID)
	require.NoError(t, err)
	env := k1.sealRecord([]byte(`"x"`))
	_, err = k2.openRecord(env)
	assert.ErrorIs(t, err, errEnvelope)
	rec, err := k1.openRecord(env)
	require.NoError(t, err)
	assert.Equal(t, `"x"`, string(rec))
}

// TestEncryptedDeleteIsFinal: a deleted encrypted session whose files
// were copied aside before the delete cannot be read once the delete is
// final (NoTrash, or Purge after the trash), even with the key provider
// and the copy put back in place; while it is in the trash, Undelete
// brings it back readable.
func TestEncryptedDeleteIsFinal(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		trash bool
	}{{"no trash", false}, {"trash then purge", true}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			o := encOptions(testKeys(t, "local:1", 7))
			if !c.trash {
				o.TrashFor = NoTrash
			}
			s, err := Open(dir, &o)
			require.NoError(t, err)
			defer func() { s.Close() }()
			id, all := encryptedWorkload(t, s)
			aside := filepath.Join(t.TempDir(), "copy")
			require.NoError(t, copyTree(filepath.Join(dir, sessionsDir, id.String()), aside))
			keyFile := filepath.Join(dir, keysDir, id.String()+".json")
			require.FileExists(t, keyFile)

			require.NoError(t, s.Delete(ctx, id))
			if c.trash {
				assert.NoFileExists(t, keyFile, "the key went to the trash with the session")
				require.NoError(t, s.Undelete(ctx, id))
				assert.FileExists(t, keyFile, "and came back")
				checkEncryptedReads(t, s, id, all)
				require.NoError(t, s.Delete(ctx, id))
				require.NoError(t, s.Purge(ctx, id))
			}
			assert.NoFileExists(t, keyFile)
			require.NoError(t, s.Close())

			// The copy, put back where it was.
			require.NoError(t, copyTree(aside, filepath.Join(dir, sessionsDir, id.String())))
			s, err = Open(dir, &o)
			require.NoError(t, err)
			_, err = s.Load(ctx, id)
			var ke *KeyError
			require.ErrorAs(t, err, &ke)
			assert.ErrorIs(t, err, ErrKeyUnavailable)
			assert.Contains(t, err.Error(), "destroyed")
			// A Delete of it finishes without its key.
			require.NoError(t, s.Delete(ctx, id))
		})
	}
}

// copyTree copies the directory from to to, which must not exist.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return vfs.Default.MkdirAll(dst, 0o755)
		}
		b, err := vfs.ReadFileLimit(vfs.Default, path, 1<<30)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	})
}

// TestEncryptedCrashPoints: a crash anywhere in an Undelete or a Purge of
// an encrypted session leaves it readable (whole in the trash with its
// key, or back with it) or gone; a Purge never leaves a kept entry
// without its key.
func TestEncryptedCrashPoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := encOptions(testKeys(t, "local:1", 7))
	check := func(state string, s *Store, victim uuid.UUID, want []Event) {
		t.Helper()
		if _, err := s.Meta(ctx, victim); err != nil {
			require.ErrorIs(t, err, ErrNotFound, state)
			if !slices.Contains(trashIDs(t, s), victim) {
				return // purged
			}
			require.NoError(t, s.Undelete(ctx, victim), state)
		}
		checkSessionWhole(t, state, s, victim, want)
		got, err := s.Load(ctx, victim)
		require.NoError(t, err, state)
		recs := recordsOf(t, s, victim, got)
		for _, w := range want {
			if r, ok := recs[w.ID]; ok {
				assert.Equal(t, string(w.Record), r, state)
			}
		}
	}
	for _, op := range []struct {
		name string
		f    func(s *Store, victim uuid.UUID) error
	}{
		{"undelete", func(s *Store, victim uuid.UUID) error { return s.Undelete(ctx, victim) }},
		{"purge", func(s *Store, victim uuid.UUID) error { return s.Purge(ctx, victim) }},
	} {
		points := trashCrashPointsWith(t, o, op.f, func(state string, s *Store, victim, other uuid.UUID, want []Event) {
			check(op.name+": "+state, s, victim, want)
		})
		t.Logf("%s: %d crash points", op.name, points)
		require.GreaterOrEqual(t, points, 3, op.name)
	}
}

// TestEncryptedCreateCrashPoints: a crash anywhere in a Create and the
// first Append of an encrypted session leaves no session, or one whose
// key is there: it opens, and appends go on.
func TestEncryptedCreateCrashPoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := Options{Keys: testKeys(t, "local:1", 7)}
	id := uuid.MustParse("01a02f3f-a89d-7d25-b4ac-ac89a183258d")
	points := crashPoints(t, func(m *vfs.MemFS) (func() error, func()) {
		s := openMem(t, m, o)
		return func() error {
			_, err := s.Create(ctx, Meta{ID: id})
			if err == nil {
				_, err = s.Append(ctx, id, UserText(secret(0)))
			}
			return err
		}, func() { s.Close() }
	}, func(state string, c *vfs.MemFS) {
		s := openMem(t, c, o)
		if _, err := s.Meta(ctx, id); err == nil {
			evs, err := s.Load(ctx, id)
			require.NoError(t, err, state)
			for _, ev := range evs {
				assert.JSONEq(t, string(UserText(secret(0)).Record), string(ev.Record), state)
			}
			_, err = s.Append(ctx, id, UserText("more"))
			require.NoError(t, err, state)
		} else {
			require.ErrorIs(t, err, ErrNotFound, state)
			_, err := s.Create(ctx, Meta{ID: id})
			require.NoError(t, err, state)
		}
		require.NoError(t, s.Close())
	})
	t.Logf("%d crash points", points)
	require.GreaterOrEqual(t, points, 4, "the key record, its directory, the session's files")
}

// crashPoints runs the operation setup makes on a fresh MemFS with the
// power cut at its first mutating operation, then at its second, and so
// on, until it runs to its end, which must succeed; after each cut it
// calls check on what a crash leaves, in every crash mode. done (setup's
// second result) runs after the operation, with no fault. It returns the
// number of crash points.
func crashPoints(t *testing.T, setup func(m *vfs.MemFS) (op func() error, done func()), check func(state string, c *vfs.MemFS)) int {
	t.Helper()
	for k := 1; ; k++ {
		m := vfs.NewMemFS()
		op, done := setup(m)
		n := 0
		m.SetFault(func(o vfs.Op, path string) error {
			if vfs.Mutating(o) {
				if n++; n == k {
					return vfs.ErrPowerLoss
				}
			}
			return nil
		})
		err := op()
		m.SetFault(nil)
		done()
		if m.PowerCut() == nil {
			require.NoError(t, err, "without a power cut the operation succeeds")
			return k - 1
		}
		m.PowerOff()
		for _, mode := range vfs.CrashModes {
			check(fmt.Sprintf("crash point %d (%v), %s", k, m.PowerCut(), mode), m.CrashClone(mode, uint64(k)))
		}
	}
}

// FuzzOpenRecord: the envelope decoder never panics and refuses what the
// key did not seal with errEnvelope; and any bytes sealed as a record
// open to themselves.
func FuzzOpenRecord(f *testing.F) {
	c, err := seal.NewCipher(bytes.Repeat([]byte{3}, 32))
	require.NoError(f, err)
	k := &sessionKey{session: uuid.MustParse("01a02f3f-a89d-7d25-b4ac-ac89a183258d"), cur: 1, ciphers: map[uint32]*seal.Cipher{1: c}}
	f.Add(k.sealRecord([]byte(`{"a":1}`)))
	f.Add(k.sealRecord([]byte(`"` + strings.Repeat("z", 1000) + `"`)))
	f.Add([]byte(`"AAAA"`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := k.openRecord(b); err != nil {
			require.ErrorIs(t, err, errEnvelope)
		}
		rec, err := k.openRecord(k.sealRecord(b))
		require.NoError(t, err)
		require.Equal(t, b, rec)
	})
}

// TestEncryptedKeySyncs: what each step of an encrypted session's key
// life leaves is durable when the call returns (a crash right after it,
// keeping only what was synced, shows it): the key record and its
// directory after Create; the record in the session's directory and out
// of keys/ after a Delete to the trash; back in keys/ after Undelete;
// gone after a Purge and after a final Delete.
func TestEncryptedKeySyncs(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := encOptions(testKeys(t, "local:1", 7))
	s := openMem(t, m, o)
	id, all := encryptedWorkload(t, s)
	require.NoError(t, s.Close())
	keyFile := filepath.Join(memRoot, keysDir, id.String()+".json")
	kept := filepath.Join(memRoot, sessionsDir, id.String(), keptKeyFile)
	exists := func(fsys vfs.FS, path string) bool {
		_, err := fsys.Stat(path)
		return err == nil
	}
	// crash opens a Store on what a crash now would leave.
	crash := func() (*vfs.MemFS, *Store) {
		c := m.CrashClone(vfs.KeepSynced, 0)
		return c, openMem(t, c, o)
	}

	c, cs := crash()
	assert.True(t, exists(c, keyFile), "after Create")
	checkEncryptedReads(t, cs, id, all)
	require.NoError(t, cs.Close())

	s = openMem(t, m, o)
	require.NoError(t, s.Delete(ctx, id))
	require.NoError(t, s.Close())
	c, cs = crash()
	assert.False(t, exists(c, keyFile), "after Delete, out of keys/")
	require.NoError(t, cs.Undelete(ctx, id))
	checkEncryptedReads(t, cs, id, all) // its key went with it
	require.NoError(t, cs.Close())

	s = openMem(t, m, o)
	require.NoError(t, s.Undelete(ctx, id))
	require.NoError(t, s.Close())
	c, cs = crash()
	assert.True(t, exists(c, keyFile), "after Undelete, back in keys/")
	assert.False(t, exists(c, kept), "after Undelete, out of the session's directory")
	require.NoError(t, cs.Close())

	s = openMem(t, m, o)
	other, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, id))
	require.NoError(t, s.Purge(ctx, id))
	require.NoError(t, s.Close())
	c, cs = crash()
	assert.False(t, exists(c, keyFile), "after Purge")
	require.NoError(t, cs.Close())

	o.TrashFor = NoTrash
	s = openMem(t, m, o)
	require.NoError(t, s.Delete(ctx, other.ID))
	require.NoError(t, s.Close())
	c, cs = crash()
	assert.False(t, exists(c, filepath.Join(memRoot, keysDir, other.ID.String()+".json")), "after a final Delete")
	require.NoError(t, cs.Close())
}

// TestRewrap: after a rotation of the key-encryption key and a Rewrap,
// every encrypted session, in the store and in the trash, reads with a
// provider that holds only the new key; a second Rewrap has nothing to
// do; without the new key nothing is rewritten.
func TestRewrap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := bytes.Repeat([]byte{1}, 32)
	b := bytes.Repeat([]byte{2}, 32)
	old, err := NewLocalKeys("kek:a", map[string][]byte{"kek:a": a})
	require.NoError(t, err)
	o := encOptions(old)
	s, err := Open(dir, &o)
	require.NoError(t, err)
	id, all := encryptedWorkload(t, s)
	trashed, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	ev, err := s.Append(ctx, trashed.ID, UserText(secret(9)))
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, trashed.ID))
	plain, err := Open(dir, &Options{})
	require.NoError(t, err)
	_, err = plain.Create(ctx, Meta{Name: "plain"})
	require.NoError(t, err)
	require.NoError(t, plain.Close())
	rep, err := s.Rewrap(ctx)
	require.NoError(t, err)
	assert.Equal(t, RewrapReport{Current: 2}, rep, "under the current key already")
	require.NoError(t, s.Close())

	both, err := NewLocalKeys("kek:b", map[string][]byte{"kek:a": a, "kek:b": b})
	require.NoError(t, err)
	o.Keys = both
	s, err = Open(dir, &o)
	require.NoError(t, err)
	rep, err = s.Rewrap(ctx)
	require.NoError(t, err)
	assert.Equal(t, RewrapReport{Rewrapped: 2}, rep)
	rep, err = s.Rewrap(ctx)
	require.NoError(t, err)
	assert.Equal(t, RewrapReport{Current: 2}, rep, "nothing left to do")
	require.NoError(t, s.Close())

	onlyB, err := NewLocalKeys("kek:b", map[string][]byte{"kek:b": b})
	require.NoError(t, err)
	o.Keys = onlyB
	s, err = Open(dir, &o)
	require.NoError(t, err)
	checkEncryptedReads(t, s, id, all)
	require.NoError(t, s.Undelete(ctx, trashed.ID))
	got, err := s.Event(ctx, trashed.ID, ev.ID)
	require.NoError(t, err)
	assert.Equal(t, string(ev.Record), string(got.Record))

	// A session another Store holds is skipped with ErrLocked.
	o.Keys = both
	c, err := Open(dir, &o)
	require.NoError(t, err)
	rep, err = c.Rewrap(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Skipped, 2)
	for _, sk := range rep.Skipped {
		assert.ErrorIs(t, sk.Err, ErrLocked)
	}
	require.NoError(t, c.Close())
	require.NoError(t, s.Close())

	// A provider without the record's key skips the session, rewriting
	// nothing.
	onlyC, err := NewLocalKeys("kek:c", map[string][]byte{"kek:c": bytes.Repeat([]byte{3}, 32)})
	require.NoError(t, err)
	o.Keys = onlyC
	c, err = Open(dir, &o)
	require.NoError(t, err)
	rep, err = c.Rewrap(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Skipped, 2)
	for _, sk := range rep.Skipped {
		var ke *KeyError
		assert.ErrorAs(t, sk.Err, &ke)
		assert.ErrorIs(t, sk.Err, ErrKeyUnavailable)
	}
	require.NoError(t, c.Close())
	o.Keys = onlyB
	s, err = Open(dir, &o)
	require.NoError(t, err)
	defer s.Close()
	checkEncryptedReads(t, s, id, all)
}

// rotationKeys returns the providers of a key rotation: old holds
// "kek:a" alone, both holds it and "kek:b" (current), onlyB "kek:b".
func rotationKeys(t *testing.T) (old, both, onlyB *LocalKeys) {
	t.Helper()
	a, b := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	old, err := NewLocalKeys("kek:a", map[string][]byte{"kek:a": a})
	require.NoError(t, err)
	both, err = NewLocalKeys("kek:b", map[string][]byte{"kek:a": a, "kek:b": b})
	require.NoError(t, err)
	onlyB, err = NewLocalKeys("kek:b", map[string][]byte{"kek:b": b})
	require.NoError(t, err)
	return old, both, onlyB
}

// TestRewrapCrashPoints: a crash anywhere in a Rewrap leaves every key
// record under the old key or the new, whole: the session reads with a
// provider holding both, and a Rewrap after it finishes the rotation.
func TestRewrapCrashPoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old, both, onlyB := rotationKeys(t)
	var id uuid.UUID
	var all []Event
	points := crashPoints(t, func(m *vfs.MemFS) (func() error, func()) {
		s := openMem(t, m, encOptions(old))
		id, all = encryptedWorkload(t, s)
		require.NoError(t, s.Close())
		s = openMem(t, m, encOptions(both))
		return func() error { _, err := s.Rewrap(ctx); return err }, func() { s.Close() }
	}, func(state string, c *vfs.MemFS) {
		s := openMem(t, c, encOptions(both))
		_, err := s.Load(ctx, id)
		require.NoError(t, err, state)
		_, err = s.Rewrap(ctx)
		require.NoError(t, err, state)
		require.NoError(t, s.Close())
		s = openMem(t, c, encOptions(onlyB))
		checkEncryptedReads(t, s, id, all)
		require.NoError(t, s.Close())
	})
	t.Logf("%d crash points", points)
	require.GreaterOrEqual(t, points, 2, "the record's temporary file, its rename")
}

// goldenKeys is the key-encryption key of testdata/golden-encrypted.
func goldenKeys(t testing.TB) *LocalKeys {
	return testKeys(t, "golden", 0x42)
}

// TestGoldenEncrypted pins the format of an encrypted session: the
// committed fixture testdata/golden-encrypted (the golden workload
// written by a Store with goldenKeys: random nonces make every writing's
// bytes differ, so the fixture is written once, with -update) opens with
// the key and loads the golden active path; every record in its chunk
// lines is an envelope; its key record is where the format says.
func TestGoldenEncrypted(t *testing.T) {
	ctx := context.Background()
	fixture := filepath.Join("testdata", "golden-encrypted")
	if *update {
		dir := t.TempDir()
		writeGoldenWorkloadWith(t, dir, goldenKeys(t))
		require.NoError(t, os.RemoveAll(fixture))
		for name, content := range readTree(t, dir) {
			if strings.HasPrefix(name, "catalogue") {
				continue
			}
			p := filepath.Join(fixture, filepath.FromSlash(name))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		}
	}
	files := readTree(t, fixture)
	require.Contains(t, files, "keys/"+goldenSession.String()+".json")
	lines := 0
	for name, content := range files {
		if !strings.Contains(name, "/chunks/") {
			continue
		}
		for _, line := range strings.Split(strings.TrimRight(content, "\x00\n"), "\n") {
			lines++
			_, rec, ok := strings.Cut(line, `,"record":`)
			require.True(t, ok, line)
			assert.True(t, strings.HasPrefix(rec, `"`) || strings.HasPrefix(rec, `null`), "an envelope or a blob's null: %s", line)
		}
	}
	assert.Equal(t, 10, lines, "every event of the workload")

	dir := copyFixture(t, "golden-encrypted")
	s, err := Open(dir, &Options{Compression: CompressionNone, Keys: goldenKeys(t)})
	require.NoError(t, err)
	defer s.Close()
	want := activePathFixture(t, "golden-active-path.json")
	got, err := s.Load(ctx, goldenSession)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i].ID, got[i].ID)
		assert.Equal(t, want[i].ParentID, got[i].ParentID)
		assert.Equal(t, want[i].Kind, got[i].Kind)
		assert.True(t, want[i].Time.Equal(got[i].Time))
		if got[i].Record == nil {
			got[i], err = s.Resolve(ctx, goldenSession, got[i])
			require.NoError(t, err)
		}
		assert.JSONEq(t, string(want[i].Record), string(got[i].Record))
	}
	m, err := s.Meta(ctx, goldenSession)
	require.NoError(t, err)
	assert.True(t, m.Encrypted)

	// Its previews are sealed in its index, and open to the plain
	// golden session's, cut to sealedPreviewText bytes.
	index := files["sessions/"+goldenSession.String()+"/index.jsonl"]
	assert.NotContains(t, index, `"preview":`)
	assert.Equal(t, 10, strings.Count(index, `"sealed_preview":"`), "every event's preview sealed")
	plain, err := Open(copyFixture(t, "golden"), &Options{Compression: CompressionNone})
	require.NoError(t, err)
	defer plain.Close()
	want2 := treePreviews(t, plain, goldenSession)
	require.NotEmpty(t, slices.DeleteFunc(slices.Clone(want2), func(p string) bool { return p == "" }), "precondition: the golden session has previews")
	for i := range want2 {
		want2[i] = cutPreview(want2[i], sealedPreviewText)
	}
	assert.Equal(t, want2, treePreviews(t, s, goldenSession))
}

// cutPreview is s cut to at most n bytes as a sealed preview is: at a
// rune boundary, without a trailing space.
func cutPreview(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return strings.TrimRight(s[:end], " ")
}

// TestEncryptedByteFlips changes bytes of every file of an encrypted
// session that holds its data or its key (chunks, the active one
// included, blobs, the key record), a sample spread over each file, two
// ways: reading every event back (Event, Resolve) either fails with a
// *CorruptionError (never a *KeyError: the key is there, the data is
// damaged; for the key record, its checksum) or returns every record as
// appended; never other records.
func TestEncryptedByteFlips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := Options{Keys: testKeys(t, "local:1", 7), ChunkSize: 2048, BlobThreshold: 600, keepPlainOnClose: true}
	m := vfs.NewMemFS()
	s := openMem(t, m, o)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	var evs []Event
	for i := range 12 {
		rec := secret(i)
		if i%4 == 3 {
			rec += bigOutput()[:2000] // a blob
		}
		ev, err := s.Append(ctx, meta.ID, UserText(rec))
		require.NoError(t, err)
		evs = append(evs, ev)
	}
	require.NoError(t, s.Close())

	var files []string
	for _, dir := range []string{sessionPath(meta.ID, chunksDir), sessionPath(meta.ID, blobsDir)} {
		for rel := range memFiles(t, m, dir) {
			if !strings.HasSuffix(rel, "/") { // a directory
				files = append(files, dir+rel)
			}
		}
	}
	slices.Sort(files)
	files = append(files, filepath.Join(memRoot, keysDir, meta.ID.String()+".json"))
	kinds := map[string]int{}
	for _, f := range files {
		switch {
		case strings.Contains(f, "/"+chunksDir+"/"):
			kinds["chunk"]++
		case strings.Contains(f, "/"+blobsDir+"/"):
			kinds["blob"]++
		default:
			kinds["key record"]++
		}
	}
	require.Greater(t, kinds["chunk"], 1, "sealed chunks and the active one")
	require.Positive(t, kinds["blob"])

	control := openMem(t, m.CrashClone(vfs.KeepAll, 0), o)
	require.Empty(t, readDetects(ctx, control, meta.ID, evs), "unchanged, every event reads back")
	require.NoError(t, control.Close())

	flips, detected, same := 0, 0, 0
	for _, f := range files {
		orig, err := vfs.ReadFile(m, f)
		require.NoError(t, err)
		step := max(1, len(orig)/40)
		for pos := 0; pos < len(orig); pos += step {
			for _, x := range []byte{0x01, 0x80} {
				flips++
				c := m.CrashClone(vfs.KeepAll, 0)
				b := bytes.Clone(orig)
				b[pos] ^= x
				writeMemFile(t, c, f, b)
				s := openMem(t, c, o)
				what := readDetects(ctx, s, meta.ID, evs)
				require.NoError(t, s.Close())
				if what == "" {
					same++
					continue
				}
				detected++
				require.NotContains(t, what, "reads back as", "%s offset %d xor %#02x: other records came back", f, pos, x)
				assert.NotContains(t, what, "key unavailable", "%s offset %d xor %#02x: %s", f, pos, x, what)
				assert.NotContains(t, what, "wrong key", "%s offset %d xor %#02x: %s", f, pos, x, what)
			}
		}
	}
	t.Logf("%d changes in %d files (%v): %d detected, %d read back as appended", flips, len(files), kinds, detected, same)
	assert.Greater(t, detected, flips/2, "most changes to data are detected")
}

// TestEncryptedDeleteCrashPoints: a crash anywhere in a Delete of an
// encrypted session, to the trash or final, leaves it readable where it
// is (in the store, or in the trash for Undelete to bring back), or, for
// a final delete, gone or without its key (a *KeyError, which a second
// Delete finishes): never in the trash without its key.
func TestEncryptedDeleteCrashPoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, final := range []bool{false, true} {
		o := encOptions(testKeys(t, "local:1", 7))
		if final {
			o.TrashFor = NoTrash
		}
		keyless := 0
		var victim, other uuid.UUID
		var want []Event
		points := crashPoints(t, func(m *vfs.MemFS) (func() error, func()) {
			victim, other, want = trashWorkload(t, m, o)
			s := openMem(t, m, o)
			return func() error { return s.Delete(ctx, victim) }, func() { s.Close() }
		}, func(state string, c *vfs.MemFS) {
			state = fmt.Sprintf("final %v, %s", final, state)
			s := openMem(t, c, o)
			_, err := s.Meta(ctx, victim)
			switch {
			case err == nil:
				if _, lerr := s.Load(ctx, victim); lerr != nil {
					require.True(t, final, "%s: a delete to the trash left the session without its key: %v", state, lerr)
					var ke *KeyError
					require.ErrorAs(t, lerr, &ke, state)
					keyless++
					require.NoError(t, s.Delete(ctx, victim), state)
					break
				}
				checkSessionWhole(t, state, s, victim, want)
			case slices.Contains(trashIDs(t, s), victim):
				require.False(t, final, state)
				require.NoError(t, s.Undelete(ctx, victim), state)
				checkSessionWhole(t, state, s, victim, want)
			default:
				require.ErrorIs(t, err, ErrNotFound, state)
			}
			_, err = s.Load(ctx, other)
			require.NoError(t, err, state)
			require.NoError(t, s.Close())
		})
		t.Logf("final %v: %d crash points, %d states without the key", final, points, keyless)
		require.GreaterOrEqual(t, points, 3)
	}
}

// TestEncryptedFork: a fork of an encrypted session is encrypted under a
// key of its own, and reads its prefix (inline records and blobs) from
// its parent's files under the parent's key, through every call that
// returns records, in the writing Store and a new one; deleting the fork
// for good leaves the parent readable.
func TestEncryptedFork(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := encOptions(testKeys(t, "local:1", 7))
	o.TrashFor = NoTrash
	s, err := Open(dir, &o)
	require.NoError(t, err)
	parent, all := encryptedWorkload(t, s)
	at := all[2] // the blob
	f, err := s.Fork(ctx, parent, at.ID)
	require.NoError(t, err)
	require.True(t, f.Encrypted)
	fevs := slices.Clone(all[:3])
	own, err := s.Append(ctx, f.ID, UserText(secret(7)))
	require.NoError(t, err)
	fevs = append(fevs, own)
	check := func(s *Store) {
		t.Helper()
		loaded, err := s.Load(ctx, f.ID)
		require.NoError(t, err)
		require.Len(t, loaded, len(fevs))
		recs := recordsOf(t, s, f.ID, loaded)
		for _, w := range fevs {
			assert.Equal(t, string(w.Record), recs[w.ID])
		}
		var seq []Event
		for ev, err := range s.LoadSeq(ctx, f.ID) {
			require.NoError(t, err)
			seq = append(seq, ev)
		}
		assert.Equal(t, recs, recordsOf(t, s, f.ID, seq))
		for _, w := range fevs {
			ev, err := s.Event(ctx, f.ID, w.ID)
			require.NoError(t, err)
			assert.Equal(t, string(w.Record), recordsOf(t, s, f.ID, []Event{ev})[w.ID], "Event %s", w.ID)
		}
	}
	check(s)
	require.NoError(t, s.Close())
	s, err = Open(dir, &o)
	require.NoError(t, err)
	defer s.Close()
	check(s)

	require.NoError(t, s.Delete(ctx, f.ID))
	checkEncryptedReads(t, s, parent, all)
}

// TestEncryptedPreviews: an encrypted session's previews are sealed in
// its index (TestEncryptedNoPlaintextOnDisk scans for them in clear) and
// shown, cut to sealedPreviewText bytes, by Tree, TreeSeq and Children of
// a Store with the key; a Store without keys shows none, nor does an
// index rebuilt from the chunk lines (they hold envelopes), nor a sealed
// preview moved to another event's index line; a plain session's show in
// full.
func TestEncryptedPreviews(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{Keys: testKeys(t, "local:1", 7)}
	s := openMem(t, m, o)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	long := secret(9) + " and then some more words, past what a sealed preview holds"
	texts := []string{secret(0), secret(1), long}
	for _, text := range texts {
		_, err := s.Append(ctx, meta.ID, UserText(text))
		require.NoError(t, err)
	}
	want := []string{secret(0), secret(1), "SECRET-0009-do-not-store-in-clear and then some"}
	require.Equal(t, " ", long[sealedPreviewText-1:sealedPreviewText], "the cut falls after a space, which goes")

	all := func(s *Store, id uuid.UUID) map[string][]string {
		t.Helper()
		out := map[string][]string{}
		tree, err := s.Tree(ctx, id)
		require.NoError(t, err)
		for _, n := range tree {
			out["Tree"] = append(out["Tree"], n.Preview)
		}
		for n, err := range s.TreeSeq(ctx, id) {
			require.NoError(t, err)
			out["TreeSeq"] = append(out["TreeSeq"], n.Preview)
		}
		parent := uuid.Nil
		for {
			kids, err := s.Children(ctx, id, parent)
			require.NoError(t, err)
			if len(kids) == 0 {
				break
			}
			out["Children"] = append(out["Children"], kids[0].Preview)
			parent = kids[0].ID
		}
		return out
	}
	check := func(what string, got map[string][]string, want []string) {
		t.Helper()
		for _, call := range []string{"Tree", "TreeSeq", "Children"} {
			assert.Equal(t, want, got[call], "%s: %s", what, call)
		}
	}
	check("the writing Store", all(s, meta.ID), want)
	require.NoError(t, s.Close())
	s = openMem(t, m, o)
	check("reopened", all(s, meta.ID), want)
	index, err := vfs.ReadFile(m, sessionPath(meta.ID, indexName))
	require.NoError(t, err)
	assert.Equal(t, 3, bytes.Count(index, []byte(`"sealed_preview":"`)), "%s", index)
	assert.NotContains(t, string(index), `"preview":`)

	noKeys := openMem(t, m, Options{ReadOnly: true})
	check("a Store without keys", all(noKeys, meta.ID), []string{"", "", ""})
	require.NoError(t, noKeys.Close())

	// A fork reads its prefix's previews under the parent's key; its own
	// under its own.
	tree, err := s.Tree(ctx, meta.ID)
	require.NoError(t, err)
	f, err := s.Fork(ctx, meta.ID, tree[1].ID)
	require.NoError(t, err)
	_, err = s.Append(ctx, f.ID, UserText(secret(3)))
	require.NoError(t, err)
	check("a fork", all(s, f.ID), []string{secret(0), secret(1), secret(3)})

	// Another event's sealed preview does not open: the sealing binds
	// the event.
	require.NoError(t, s.Close())
	lines := bytes.SplitAfter(index, []byte("\n"))
	var es []eventline.Entry
	for _, l := range lines {
		if len(l) == 0 {
			continue
		}
		e, err := eventline.DecodeIndex(bytes.TrimSuffix(l, []byte("\n")))
		require.NoError(t, err)
		es = append(es, e)
	}
	require.Len(t, es, 3)
	es[0].Preview, es[1].Preview = es[1].Preview, es[0].Preview
	var swapped []byte
	for i := range es {
		swapped = eventline.AppendIndex(swapped, &es[i])
	}
	require.Len(t, swapped, len(index))
	writeMemFile(t, m, sessionPath(meta.ID, indexName), swapped)
	s = openMem(t, m, o)
	check("previews swapped between index lines", all(s, meta.ID), []string{"", "", want[2]})
	require.NoError(t, s.Close())

	require.NoError(t, m.Remove(sessionPath(meta.ID, indexName))) // rebuilt at the next open
	s = openMem(t, m, o)
	defer s.Close()
	check("an index rebuilt from the chunk lines: made again from the records (fillPreviews)", all(s, meta.ID), want)

	p := openMem(t, vfs.NewMemFS(), Options{})
	defer p.Close()
	pm, err := p.Create(ctx, Meta{})
	require.NoError(t, err)
	_, err = p.Append(ctx, pm.ID, UserText(long))
	require.NoError(t, err)
	ptree, err := p.Tree(ctx, pm.ID)
	require.NoError(t, err)
	assert.Equal(t, long[:eventline.PreviewMax], ptree[0].Preview, "a plain session's preview")
}

// TestEncryptedKeyCacheAcrossStores: a Store that read a session's key
// does not go on using it once another Store deleted the session and made
// it again under its id (a new key): it reads the new session's records,
// and what it appends the other Store reads.
func TestEncryptedKeyCacheAcrossStores(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := encOptions(testKeys(t, "local:1", 7))
	o.TrashFor = NoTrash
	a := openMem(t, m, o)
	defer a.Close()
	b := openMem(t, m, o)
	defer b.Close()
	meta, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	_, err = a.Append(ctx, meta.ID, UserText(secret(0)))
	require.NoError(t, err)
	require.NoError(t, a.CloseSession(ctx, meta.ID))

	require.NoError(t, b.Delete(ctx, meta.ID))
	_, err = b.Create(ctx, Meta{ID: meta.ID})
	require.NoError(t, err)
	again, err := b.Append(ctx, meta.ID, UserText(secret(1)))
	require.NoError(t, err)
	require.NoError(t, b.CloseSession(ctx, meta.ID))

	got, err := a.Event(ctx, meta.ID, again.ID)
	require.NoError(t, err, "the new session's key, not the cached one")
	assert.Equal(t, string(again.Record), string(got.Record))
	more, err := a.Append(ctx, meta.ID, UserText(secret(2)))
	require.NoError(t, err)
	require.NoError(t, a.CloseSession(ctx, meta.ID))
	got, err = b.Event(ctx, meta.ID, more.ID)
	require.NoError(t, err)
	assert.Equal(t, string(more.Record), string(got.Record))
}

// TestBranchSummaryFirstCall: AppendBranchSummary as a Store's first
// call on a session, plain or encrypted, appends (it asked whether the
// session is encrypted through the registry, which takes the session's
// mutex it already held, and waited for itself for ever).
func TestBranchSummaryFirstCall(t *testing.T) {
	ctx := context.Background()
	for _, keys := range []KeyProvider{nil, testKeys(t, "local:1", 7)} {
		dir := t.TempDir()
		o := Options{Keys: keys}
		s, err := Open(dir, &o)
		require.NoError(t, err)
		m, err := s.Create(ctx, Meta{})
		require.NoError(t, err)
		ev, err := s.Append(ctx, m.ID, UserText(secret(1)))
		require.NoError(t, err)
		require.NoError(t, s.Close())
		s, err = Open(dir, &o)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			_, err := s.AppendBranchSummary(ctx, m.ID, ev.ID, BranchSummaryRecord{Summary: Summary{Text: secret(2)}})
			done <- err
		}()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(20 * time.Second):
			t.Fatalf("AppendBranchSummary (keys %v) did not return", keys != nil)
		}
		evs, err := s.Load(ctx, m.ID)
		require.NoError(t, err)
		assert.Contains(t, string(evs[len(evs)-1].Record), secret(2))
		require.NoError(t, s.Close())
	}
}
