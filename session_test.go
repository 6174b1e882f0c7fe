package sessionstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// apiClock is a settable clock for the Options.now seam: every call
// advances it by a minute.
type apiClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *apiClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Minute)
	return c.now
}

// apiReadFile reads a file and requires success.
func apiReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// apiWriteMeta writes a session.json for id into dir, creating dir.
func apiWriteMeta(t *testing.T, dir string, id uuid.UUID) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	b, err := encodeMeta(Meta{ID: id, Name: "stray", CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}, formatVersion)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "session.json"), b, 0o600))
}

// apiUmask returns the process's umask (0o022 when it cannot be read).
func apiUmask(t *testing.T) fs.FileMode {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0o022
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Umask:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			require.NoError(t, err)
			return fs.FileMode(n)
		}
	}
	return 0o022
}

func TestAPICreate(t *testing.T) {
	ctx := t.Context()
	t.Run("assigns an id when zero", func(t *testing.T) {
		s, dir := apiNewStore(t, nil)
		labels := map[string]string{"team": "a"}
		before := time.Now()
		m, err := s.Create(ctx, Meta{Name: "n", WorkingDir: "/w", Model: "model-1", Labels: labels})
		require.NoError(t, err)
		assert.Equal(t, uuid.Version(7), m.ID.Version())
		assert.Equal(t, "n", m.Name)
		assert.Equal(t, "/w", m.WorkingDir)
		assert.Equal(t, "model-1", m.Model)
		assert.Equal(t, map[string]string{"team": "a"}, m.Labels)
		assert.Equal(t, time.UTC, m.CreatedAt.Location())
		assert.WithinDuration(t, before, m.CreatedAt, time.Minute)
		assert.True(t, m.UpdatedAt.Equal(m.CreatedAt), "UpdatedAt starts equal to CreatedAt")

		labels["team"] = "changed after Create"
		got, err := s.Meta(ctx, m.ID)
		require.NoError(t, err)
		assert.Equal(t, m, got, "Meta returns what Create stored; Create kept no alias of the caller's map")

		sdir := apiSessionDir(dir, m.ID)
		for _, name := range []string{"session.json", "chunks", "blobs", "LOCK"} {
			_, err := os.Stat(filepath.Join(sdir, name))
			assert.NoError(t, err, name)
		}

		m2, err := s.Create(ctx, Meta{})
		require.NoError(t, err)
		assert.NotEqual(t, m.ID, m2.ID)
		assert.Negative(t, bytes.Compare(m.ID[:], m2.ID[:]), "generated ids increase")
	})
	t.Run("keeps a given id and CreatedAt", func(t *testing.T) {
		s, dir := apiNewStore(t, nil)
		id := uuid.New() // any UUID is accepted, not only v7
		created := time.Date(2024, 2, 29, 12, 30, 0, 123456789, time.FixedZone("X", 5*3600))
		m, err := s.Create(ctx, Meta{ID: id, CreatedAt: created, UpdatedAt: created.Add(time.Hour)})
		require.NoError(t, err)
		assert.Equal(t, id, m.ID)
		assert.True(t, m.CreatedAt.Equal(created))
		assert.Equal(t, time.UTC, m.CreatedAt.Location(), "CreatedAt is stored in UTC")
		assert.True(t, m.UpdatedAt.Equal(created), "UpdatedAt starts equal to CreatedAt, whatever the caller passed")
		assert.DirExists(t, apiSessionDir(dir, id))
		got, err := s.Meta(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, m, got)
	})
	t.Run("reuses a directory left without session.json", func(t *testing.T) {
		s, dir := apiNewStore(t, nil)
		id := uuid.New()
		require.NoError(t, os.MkdirAll(filepath.Join(apiSessionDir(dir, id), "chunks"), 0o700))
		_, err := s.Append(ctx, id, UserText("x"))
		assert.ErrorIs(t, err, ErrNotFound, "a half-created session is not a session")
		m, err := s.Create(ctx, Meta{ID: id, Name: "finished"})
		require.NoError(t, err)
		assert.Equal(t, id, m.ID)
		apiAppend(t, s, id, UserText("x"))
	})
}

func TestAPICreateExists(t *testing.T) {
	ctx := t.Context()
	s1, dir := apiNewStore(t, nil)
	id := uuid.New()
	_, err := s1.Create(ctx, Meta{ID: id, Name: "original"})
	require.NoError(t, err)
	apiAppend(t, s1, id, UserText("x"))
	metaPath := filepath.Join(apiSessionDir(dir, id), "session.json")
	original := apiReadFile(t, metaPath)

	_, err = s1.Create(ctx, Meta{ID: id, Name: "duplicate"})
	assert.ErrorIs(t, err, ErrExists, "same Store")
	assert.Equal(t, original, apiReadFile(t, metaPath))

	// A second Store: the first holds the session's lock, and Create checks
	// the lock before looking for session.json, so it reports ErrLocked.
	s2 := apiOpen(t, dir, nil)
	_, err = s2.Create(ctx, Meta{ID: id, Name: "duplicate"})
	assert.ErrorIs(t, err, ErrLocked, "second Store while the first holds the session")
	assert.NotErrorIs(t, err, ErrExists)
	assert.Equal(t, original, apiReadFile(t, metaPath))

	// Once the first Store lets go, the second sees the session on disk.
	require.NoError(t, s1.Close())
	original = apiReadFile(t, metaPath) // Close may checkpoint UpdatedAt
	_, err = s2.Create(ctx, Meta{ID: id, Name: "duplicate"})
	assert.ErrorIs(t, err, ErrExists, "second Store after the first closed")
	assert.NotErrorIs(t, err, ErrLocked)
	assert.Equal(t, original, apiReadFile(t, metaPath))

	// The failed Create left the session usable.
	m, err := s2.Meta(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "original", m.Name)
	require.Len(t, apiLoad(t, s2, id), 1)
	apiAppend(t, s2, id, UserText("y"))

	// And after reopening, the same.
	require.NoError(t, s2.Close())
	s3 := apiOpen(t, dir, nil)
	_, err = s3.Create(ctx, Meta{ID: id})
	assert.ErrorIs(t, err, ErrExists)
}

func TestAPIMeta(t *testing.T) {
	ctx := t.Context()
	s, dir := apiNewStore(t, nil)
	want, err := s.Create(ctx, Meta{Name: "n", WorkingDir: "/src", Model: "m", Labels: map[string]string{"a": "1", "b": "2"}})
	require.NoError(t, err)
	got, err := s.Meta(ctx, want.ID)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	_, err = s.Meta(ctx, uuid.New())
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s.Meta(ctx, uuid.Nil)
	assert.ErrorIs(t, err, ErrNotFound)

	require.NoError(t, s.Close())
	got, err = apiOpen(t, dir, nil).Meta(ctx, want.ID)
	require.NoError(t, err)
	assert.Equal(t, want, got, "metadata survives a reopen")
}

func TestAPISessionJSONFormat(t *testing.T) {
	s, dir := apiNewStore(t, nil)
	m, err := s.Create(t.Context(), Meta{Name: "n", WorkingDir: "/w", Model: "mod", Labels: map[string]string{"k": "v"}})
	require.NoError(t, err)
	b := apiReadFile(t, filepath.Join(apiSessionDir(dir, m.ID), "session.json"))
	assert.True(t, bytes.HasSuffix(b, []byte("}\n")), "session.json ends with a newline")
	assert.Contains(t, string(b), "\n  \"format\": 3,", "session.json is indented and holds the format version")

	var rec map[string]any
	require.NoError(t, json.Unmarshal(b, &rec))
	assert.Equal(t, float64(3), rec["format"])
	assert.Equal(t, m.ID.String(), rec["id"])
	assert.Equal(t, "n", rec["name"])
	assert.Equal(t, "/w", rec["working_dir"])
	assert.Equal(t, "mod", rec["model"])
	assert.Equal(t, map[string]any{"k": "v"}, rec["labels"])
	assert.Equal(t, m.CreatedAt.Format(time.RFC3339Nano), rec["created_at"])
	assert.Equal(t, m.UpdatedAt.Format(time.RFC3339Nano), rec["updated_at"])

	// Empty optional fields are omitted.
	m2, err := s.Create(t.Context(), Meta{})
	require.NoError(t, err)
	var rec2 map[string]any
	require.NoError(t, json.Unmarshal(apiReadFile(t, filepath.Join(apiSessionDir(dir, m2.ID), "session.json")), &rec2))
	keys := make([]string, 0, len(rec2))
	for k := range rec2 {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	assert.Equal(t, []string{"crc", "created_at", "format", "id", "updated_at"}, keys)
}

// TestSessionJSONChecksum: session.json ends with its checksum, the
// CRC-32C of every byte before the member; a changed byte is reported by
// Meta, List and Verify with the file's path, while a file without the
// member (written before it was added) is read unchecked.
func TestSessionJSONChecksum(t *testing.T) {
	ctx := t.Context()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	meta, err := s.Create(ctx, Meta{Name: "checked"})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	path := sessionPath(meta.ID, metaFile)
	b, err := vfs.ReadFile(m, path)
	require.NoError(t, err)
	intro := bytes.LastIndex(b, []byte(",\n  \"crc\": \""))
	require.Positive(t, intro)
	assert.Equal(t, fmt.Sprintf(",\n  \"crc\": \"%08x\"\n}\n", crc32.Checksum(b[:intro], crc32.MakeTable(crc32.Castagnoli))), string(b[intro:]),
		"the last member is the CRC-32C of every byte before it")

	// A changed letter in the name: still valid JSON, other metadata.
	name := bytes.Index(b, []byte(`"checked"`))
	require.Positive(t, name)
	changed := bytes.Clone(b)
	changed[name+1] = 'C'
	writeMemFile(t, m, path, changed)
	s = openMem(t, m, Options{})
	_, err = s.Meta(ctx, meta.ID)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, path, ce.Path)
	assert.Equal(t, int64(intro+len(",\n  \"crc\": \"")), ce.Offset, "the offset of the checksum")
	// List answers from the catalogue while the sessions directory is
	// unchanged (the file was changed in place), and reads the file, to
	// report it, once the directory changed.
	listed, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.Equal(t, "checked", listed[0].Name, "the metadata the store wrote")
	touchSessionsDir(t, m)
	_, err = s.List(ctx)
	var le *ListError
	require.ErrorAs(t, err, &le)
	require.Len(t, le.Unreadable, 1)
	assert.Equal(t, path, le.Unreadable[0].Path)
	r, err := s.Verify(ctx, meta.ID)
	require.NoError(t, err)
	require.False(t, r.OK())
	assert.Equal(t, path, r.Problems[0].Path)
	require.NoError(t, s.Close())

	// Without the member, as an older build writes it, the file is read.
	old := append(bytes.Clone(b[:intro]), "\n}\n"...)
	writeMemFile(t, m, path, old)
	s = openMem(t, m, Options{})
	defer s.Close()
	got, err := s.Meta(ctx, meta.ID)
	require.NoError(t, err)
	assert.Equal(t, "checked", got.Name)
	assert.Equal(t, meta.ID, got.ID)
}

// TestListMany: List reads the session.json files of many sessions on
// several goroutines and still returns them all, in id order, skips an
// unfinished Create, reports a damaged session.json, and honours its
// context.
func TestListMany(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	const n = 5 * listBatch
	var want []Meta
	for i := range n {
		meta, err := s.Create(ctx, Meta{Name: fmt.Sprint("session ", i)})
		require.NoError(t, err)
		want = append(want, meta)
	}
	slices.SortFunc(want, func(a, b Meta) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	// A Create that never wrote session.json.
	require.NoError(t, m.MkdirAll(sessionPath(uuid.New(), chunksDir), 0o700))

	list, err := s.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, list)

	// A damaged session.json and one of a future format are reported,
	// each with its path, beside every readable session: they hide none.
	damaged, future := want[n/2].ID, want[n-1].ID
	writeMemFile(t, m, sessionPath(damaged, metaFile), []byte(`{"id":`))
	writeMemFile(t, m, sessionPath(future, metaFile), []byte(`{"format":99,"id":"`+future.String()+`"}`))
	list, err = s.List(ctx)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce, "a damaged session.json is reported, not skipped")
	assert.Equal(t, sessionPath(damaged, metaFile), ce.Path)
	assert.ErrorIs(t, err, ErrUnsupportedFormat)
	var le *ListError
	require.ErrorAs(t, err, &le)
	require.Len(t, le.Unreadable, 2)
	assert.Equal(t, damaged, le.Unreadable[0].ID)
	assert.Equal(t, sessionPath(damaged, metaFile), le.Unreadable[0].Path)
	assert.Equal(t, future, le.Unreadable[1].ID)
	assert.Equal(t, sessionPath(future, metaFile), le.Unreadable[1].Path)
	assert.Contains(t, err.Error(), sessionPath(damaged, metaFile))
	assert.Contains(t, err.Error(), "and 1 more")
	readable := slices.DeleteFunc(slices.Clone(want), func(m Meta) bool { return m.ID == damaged || m.ID == future })
	assert.Equal(t, readable, list, "every readable session is listed")

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.List(canceled)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestAPIList(t *testing.T) {
	ctx := t.Context()
	s, dir := apiNewStore(t, nil)
	root := filepath.Join(dir, "sessions")

	list, err := s.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, list, "a new store lists nothing")

	// Random (v4) ids created out of order, and generated v7 ids.
	var want []Meta
	for i := range 6 {
		meta := Meta{Name: fmt.Sprint(i)}
		if i%2 == 0 {
			meta.ID = uuid.New()
		}
		m, err := s.Create(ctx, meta)
		require.NoError(t, err)
		want = append(want, m)
	}
	ev := apiAppend(t, s, want[0].ID, UserText("an append is a write: UpdatedAt follows it"))
	want[0].UpdatedAt = ev.Time
	slices.SortFunc(want, func(a, b Meta) int { return bytes.Compare(a.ID[:], b.ID[:]) })

	// Stray entries that are not sessions.
	upper := uuid.New()
	braced := uuid.New()
	urn := uuid.New()
	suffixed := uuid.MustParse("01234567-89ab-cdef-0123-456789abcdef")
	noMeta := uuid.New()
	outside := uuid.New()
	require.NoError(t, os.WriteFile(filepath.Join(root, "README"), []byte("not a session"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(root, "not-a-uuid"), 0o700))
	apiWriteMeta(t, filepath.Join(root, suffixed.String()+"-x"), suffixed)
	apiWriteMeta(t, filepath.Join(root, strings.ToUpper(upper.String())), upper)
	apiWriteMeta(t, filepath.Join(root, "{"+braced.String()+"}"), braced)
	apiWriteMeta(t, filepath.Join(root, "urn:uuid:"+urn.String()), urn)
	apiWriteMeta(t, filepath.Join(root, strings.ReplaceAll(braced.String(), "-", "")), braced)
	require.NoError(t, os.MkdirAll(filepath.Join(root, noMeta.String(), "chunks"), 0o700))
	// "sessions/../x": a session-shaped directory outside sessions/.
	apiWriteMeta(t, filepath.Join(dir, "x"), outside)
	apiWriteMeta(t, filepath.Join(dir, outside.String()), outside)

	list, err = s.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, list, "List returns every session, ordered by id, and ignores stray entries")

	// None of the strays can be reached through the API: ids are UUIDs and
	// only their canonical form names a directory.
	for _, stray := range []uuid.UUID{upper, braced, urn, suffixed, noMeta, outside} {
		_, err := s.Meta(ctx, stray)
		assert.ErrorIs(t, err, ErrNotFound, "Meta %s", stray)
		_, err = s.Append(ctx, stray, UserText("x"))
		assert.ErrorIs(t, err, ErrNotFound, "Append %s", stray)
		_, err = s.Load(ctx, stray)
		assert.ErrorIs(t, err, ErrNotFound, "Load %s", stray)
		_, err = s.UpdateMeta(ctx, stray, func(m *Meta) {})
		assert.ErrorIs(t, err, ErrNotFound, "UpdateMeta %s", stray)
	}
	_, err = os.Stat(filepath.Join(root, noMeta.String(), "session.json"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "failed lookups created nothing")

	// A reopened store lists the same.
	require.NoError(t, s.Close())
	list, err = apiOpen(t, dir, nil).List(ctx)
	require.NoError(t, err)
	assert.Equal(t, want[0].ID, list[0].ID)
	assert.Len(t, list, len(want))
}

func TestAPIListIgnoresFileNamedLikeSession(t *testing.T) {
	// A regular file whose name is a canonical session id is a stray entry
	// too; it must not make List fail.
	s, dir := apiNewStore(t, nil)
	id := apiNewSession(t, s)
	stray := uuid.New()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sessions", stray.String()), []byte("{}"), 0o600))
	list, err := s.List(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, id, list[0].ID)
	_, err = s.Meta(t.Context(), stray)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s.Append(t.Context(), stray, UserText("x"))
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s.Load(t.Context(), stray)
	assert.ErrorIs(t, err, ErrNotFound)
}

func TestAPIListReadsOnlySessionJSON(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	// A first Store writes several sessions and keeps them open (locked),
	// as a busy writer would.
	writer := apiOpen(t, dir, &Options{ChunkSize: 512, Compression: CompressionNone})
	var ids []uuid.UUID
	for i := range 3 {
		id := apiNewSession(t, writer)
		for j := range 5 {
			apiAppend(t, writer, id, UserText(fmt.Sprintf("%d/%d %s", i, j, strings.Repeat("z", 100))))
		}
		ids = append(ids, id)
	}

	counting := vfs.NewCounting(vfs.Default)
	reader := apiOpen(t, dir, &Options{fs: counting, Compression: CompressionNone})
	counting.Reset()

	list, err := reader.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, len(ids))
	for _, m := range list {
		_, err := reader.Meta(ctx, m.ID)
		require.NoError(t, err)
	}

	stats := counting.Stats()
	opened := make([]string, 0, len(stats))
	for path, st := range stats {
		if st.Opens == 0 {
			continue
		}
		opened = append(opened, path)
		assert.Contains(t, []string{"session.json", catalogueName, catalogueLogName}, filepath.Base(path), "List/Meta opened %s", path)
		assert.False(t, strings.HasSuffix(path, "index.jsonl"), "List/Meta opened the index %s", path)
		assert.False(t, strings.HasSuffix(path, ".jsonl") && filepath.Base(filepath.Dir(path)) == "chunks", "List/Meta opened the chunk %s", path)
		assert.NotEqual(t, "LOCK", filepath.Base(path))
	}
	wantOpened := make([]string, len(ids))
	for i, id := range ids {
		wantOpened[i] = filepath.Join(apiSessionDir(dir, id), "session.json")
	}
	wantOpened = append(wantOpened, filepath.Join(dir, catalogueName), filepath.Join(dir, catalogueLogName))
	slices.Sort(opened)
	slices.Sort(wantOpened)
	assert.Equal(t, wantOpened, opened)

	// The seam does see timeline reads, so the checks above can fail: a
	// Load (here refused with ErrLocked, as the writer holds the session)
	// and, once the writer is gone, a Load that reads index and chunks.
	counting.Reset()
	_, err = reader.Load(ctx, ids[0])
	assert.ErrorIs(t, err, ErrLocked)
	require.NoError(t, writer.Close())
	counting.Reset()
	_, err = reader.Load(ctx, ids[0])
	require.NoError(t, err)
	stats = counting.Stats()
	sdir := apiSessionDir(dir, ids[0])
	assert.Positive(t, stats[filepath.Join(sdir, "index.jsonl")].Opens, "Load opens the index")
	assert.Positive(t, stats[filepath.Join(sdir, "chunks", "000000.jsonl")].Bytes, "Load reads the chunks")
}

func TestAPIUpdateMeta(t *testing.T) {
	ctx := t.Context()
	clock := &apiClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	dir := t.TempDir()
	s := apiOpen(t, dir, &Options{now: clock.Now})
	created, err := s.Create(ctx, Meta{Name: "old", Labels: map[string]string{"keep": "1"}})
	require.NoError(t, err)
	id := created.ID
	metaPath := filepath.Join(apiSessionDir(dir, id), "session.json")

	updated, err := s.UpdateMeta(ctx, id, func(m *Meta) {
		m.Name = "new"
		m.WorkingDir = "/work"
		m.Model = "model-2"
		m.Labels["added"] = "2"
		m.UpdatedAt = time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC) // overwritten
	})
	require.NoError(t, err)
	assert.Equal(t, id, updated.ID)
	assert.Equal(t, "new", updated.Name)
	assert.Equal(t, "/work", updated.WorkingDir)
	assert.Equal(t, "model-2", updated.Model)
	assert.Equal(t, map[string]string{"keep": "1", "added": "2"}, updated.Labels)
	assert.True(t, updated.CreatedAt.Equal(created.CreatedAt))
	assert.True(t, updated.UpdatedAt.After(created.UpdatedAt), "UpdatedAt is set to now")
	assert.True(t, updated.UpdatedAt.Equal(created.CreatedAt.Add(time.Minute)), "UpdatedAt comes from the clock: %v", updated.UpdatedAt)
	assert.Equal(t, map[string]string{"keep": "1"}, created.Labels, "UpdateMeta did not touch the caller's earlier copy")

	got, err := s.Meta(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, updated, got)

	refusals := []struct {
		name string
		fn   func(*Meta)
	}{
		{"changed ID", func(m *Meta) { m.ID = uuid.New(); m.Name = "refused" }},
		{"nil ID", func(m *Meta) { m.ID = uuid.Nil }},
		{"changed CreatedAt", func(m *Meta) { m.CreatedAt = m.CreatedAt.Add(time.Second); m.Labels["refused"] = "x" }},
		{"zero CreatedAt", func(m *Meta) { m.CreatedAt = time.Time{} }},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			before := apiReadFile(t, metaPath)
			_, err := s.UpdateMeta(ctx, id, tc.fn)
			assert.ErrorIs(t, err, ErrInvalidMeta)
			assert.Equal(t, string(before), string(apiReadFile(t, metaPath)), "session.json unchanged")
			got, err := s.Meta(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, updated, got)
		})
	}
	// The refused changes did not leak into the cached metadata either.
	again, err := s.UpdateMeta(ctx, id, func(m *Meta) {})
	require.NoError(t, err)
	assert.Equal(t, "new", again.Name)
	assert.Equal(t, map[string]string{"keep": "1", "added": "2"}, again.Labels)
	assert.True(t, again.UpdatedAt.After(updated.UpdatedAt))

	for _, unknown := range []uuid.UUID{uuid.New(), uuid.Nil} {
		_, err = s.UpdateMeta(ctx, unknown, func(m *Meta) { m.Name = "x" })
		assert.ErrorIs(t, err, ErrNotFound)
		_, err = s.Meta(ctx, unknown)
		assert.ErrorIs(t, err, ErrNotFound)
		_, err = os.Stat(apiSessionDir(dir, unknown))
		assert.ErrorIs(t, err, fs.ErrNotExist, "UpdateMeta of an unknown session creates nothing")
	}

	// UpdatedAt follows the newest event when the session is closed.
	ev := apiAppend(t, s, id, UserText("later"))
	require.True(t, ev.Time.After(again.UpdatedAt))
	require.NoError(t, s.Close())
	s2 := apiOpen(t, dir, nil)
	got, err = s2.Meta(ctx, id)
	require.NoError(t, err)
	assert.True(t, got.UpdatedAt.Equal(ev.Time), "UpdatedAt %v, newest event %v", got.UpdatedAt, ev.Time)
	assert.Equal(t, "new", got.Name, "metadata survives a reopen")
}

func TestAPIFileModes(t *testing.T) {
	umask := apiUmask(t)
	cases := []struct {
		name              string
		opts              *Options
		fileMode, dirMode fs.FileMode
	}{
		{"defaults", nil, 0o600, 0o700},
		{"zero options", &Options{}, DefaultFileMode, DefaultDirMode},
		{"custom", &Options{FileMode: 0o640, DirMode: 0o750}, 0o640, 0o750},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			s := apiOpen(t, dir, tc.opts)
			id := apiNewSession(t, s)
			apiAppend(t, s, id, UserText("a"))
			apiAppend(t, s, id, UserText("b"))
			_, err := s.UpdateMeta(t.Context(), id, func(m *Meta) { m.Name = "renamed" })
			require.NoError(t, err)
			require.NoError(t, s.Close())

			sdir := apiSessionDir(dir, id)
			for _, name := range []string{"session.json", "LOCK", "HEAD", "index.jsonl", filepath.Join("chunks", "000000.jsonl")} {
				assert.FileExists(t, filepath.Join(sdir, name))
			}
			files := apiFiles(t, dir)
			require.Contains(t, files, ".")
			for rel, kind := range files {
				info, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rel)))
				require.NoError(t, err)
				want := tc.fileMode
				if kind == "dir" {
					want = tc.dirMode
				}
				assert.Equal(t, want&^umask, info.Mode().Perm(), "mode of %s", rel)
			}
		})
	}
}

func TestAPIOptionsValidation(t *testing.T) {
	bad := []struct {
		name string
		opts Options
	}{
		{"negative ChunkSize", Options{ChunkSize: -1}},
		{"negative MaxRecordSize", Options{MaxRecordSize: -1}},
		{"MaxRecordSize over 1 GiB", Options{MaxRecordSize: 1<<30 + 1}},
		{"FileMode with type bits", Options{FileMode: fs.ModeDir | 0o600}},
		{"DirMode with setuid", Options{DirMode: fs.ModeSetuid | 0o700}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			opts := tc.opts
			s, err := Open(dir, &opts)
			assert.ErrorIs(t, err, ErrInvalidOptions)
			assert.Nil(t, s)
			assert.Equal(t, tc.opts, opts, "Open does not mutate the options")
			assert.NoDirExists(t, dir, "nothing is created for refused options")
		})
	}

	good := []struct {
		name string
		opts *Options
	}{
		{"nil", nil},
		{"zero", &Options{}},
		{"MaxRecordSize at 1 GiB", &Options{MaxRecordSize: 1 << 30}},
		{"ChunkSize 1", &Options{ChunkSize: 1}},
		{"all set", &Options{ChunkSize: 4096, MaxRecordSize: 100, FileMode: 0o644, DirMode: 0o755}},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			var before Options
			if tc.opts != nil {
				before = *tc.opts
			}
			s := apiOpen(t, t.TempDir(), tc.opts)
			if tc.opts != nil {
				assert.Equal(t, before, *tc.opts, "Open does not mutate the options")
			}
			id := apiNewSession(t, s)
			apiAppend(t, s, id, UserText("ok"))
		})
	}

	t.Run("options are copied", func(t *testing.T) {
		opts := &Options{MaxRecordSize: 100}
		s := apiOpen(t, t.TempDir(), opts)
		opts.MaxRecordSize = 10 // no effect on the open store
		id := apiNewSession(t, s)
		apiAppend(t, s, id, UserText(strings.Repeat("a", 50)))
		_, err := s.Append(t.Context(), id, UserText(strings.Repeat("a", 100)))
		assert.ErrorIs(t, err, ErrRecordTooLarge, "the limit given to Open still applies")
	})

	t.Run("root is a file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "file")
		require.NoError(t, os.WriteFile(path, nil, 0o600))
		s, err := Open(path, nil)
		assert.Error(t, err)
		assert.NotErrorIs(t, err, ErrInvalidOptions)
		assert.Nil(t, s)
	})
}

// TestMetaSessionJSONCannotHold: metadata session.json cannot hold as it
// is (a string that is not valid UTF-8, which JSON would store changed; a
// year past 9999, which JSON cannot encode) is refused with
// ErrInvalidMeta, by Create before it creates anything and by UpdateMeta
// before it writes.
func TestMetaSessionJSONCannotHold(t *testing.T) {
	ctx := context.Background()
	cases := map[string]func(*Meta){
		"name":        func(m *Meta) { m.Name = "caf\xe9" },
		"working dir": func(m *Meta) { m.WorkingDir = "/src/\xff" },
		"label key":   func(m *Meta) { m.Labels = map[string]string{"k\xfe": "v"} },
		"label value": func(m *Meta) { m.Labels = map[string]string{"k": "v\xfe"} },
	}
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	defer s.Close()
	for name, change := range cases {
		t.Run("create "+name, func(t *testing.T) {
			meta := Meta{ID: uuid.Must(uuid.NewV7())}
			change(&meta)
			_, err := s.Create(ctx, meta)
			assert.ErrorIs(t, err, ErrInvalidMeta)
			_, statErr := m.Stat(sessionPath(meta.ID))
			assert.ErrorIs(t, statErr, os.ErrNotExist, "nothing created")
		})
	}
	far := Meta{ID: uuid.Must(uuid.NewV7()), CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	_, err := s.Create(ctx, far)
	assert.ErrorIs(t, err, ErrInvalidMeta)
	_, statErr := m.Stat(sessionPath(far.ID))
	assert.ErrorIs(t, statErr, os.ErrNotExist, "nothing created")

	created, err := s.Create(ctx, Meta{Name: "café"})
	require.NoError(t, err)
	for name, change := range cases {
		t.Run("update "+name, func(t *testing.T) {
			_, err := s.UpdateMeta(ctx, created.ID, change)
			assert.ErrorIs(t, err, ErrInvalidMeta)
			back, err := s.Meta(ctx, created.ID)
			require.NoError(t, err)
			assert.Equal(t, "café", back.Name, "session.json unchanged")
			assert.Empty(t, back.Labels)
		})
	}
}
