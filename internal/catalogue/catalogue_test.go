package catalogue

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// testRoot is the store root of the tests' MemFS.
const testRoot = "/store"

// fixture is a store as far as the catalogue sees one: session
// directories with a session.json each (here the Meta as encoding/json
// writes it), changed by the protocol's steps (WillWrite, a durable
// replace of session.json, Wrote) as the store changes them.
type fixture struct {
	t    *testing.T
	fsys *vfs.MemFS
	c    *Catalogue
	n    uint64 // ids made
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	m := vfs.NewMemFS()
	require.NoError(t, m.MkdirAll(filepath.Join(testRoot, layout.SessionsDir), 0o700))
	f := &fixture{t: t, fsys: m}
	f.c = f.open(false)
	return f
}

// open returns another Catalogue of the fixture's files, as another
// Store (or process) has.
func (f *fixture) open(readOnly bool) *Catalogue {
	return New(Config{FS: f.fsys, Root: testRoot, FileMode: 0o600, ReadOnly: readOnly, ReadMeta: readTestMeta(f.fsys)})
}

// readTestMeta reads the fixture's session.json files (Config.ReadMeta).
func readTestMeta(fsys vfs.FS) func(sdir string, id uuid.UUID, buf []byte) (Meta, []byte, error) {
	return func(sdir string, id uuid.UUID, buf []byte) (Meta, []byte, error) {
		b, err := vfs.ReadFile(fsys, filepath.Join(sdir, layout.MetaFile))
		if errors.Is(err, fs.ErrNotExist) {
			return Meta{}, buf, ErrAbsent
		}
		if err != nil {
			return Meta{}, buf, err
		}
		var m Meta
		if err := json.Unmarshal(b, &m); err != nil {
			return Meta{}, buf, err
		}
		if m.ID != id {
			return Meta{}, buf, fmt.Errorf("session.json of %s names %s", id, m.ID)
		}
		return m, buf, nil
	}
}

func (f *fixture) sdir(id uuid.UUID) string {
	return filepath.Join(testRoot, layout.SessionsDir, id.String())
}

// create makes a session as Create does: a pending record with its
// directory made under the lock, session.json, a commit.
func (f *fixture) create(name string) Meta {
	f.t.Helper()
	f.n++
	var id uuid.UUID // UUIDv7-like, increasing
	binary.BigEndian.PutUint64(id[:8], f.n<<16|0x7000)
	binary.BigEndian.PutUint64(id[8:], 0x8000000000000000|f.n)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(f.n) * time.Millisecond)
	require.NoError(f.t, f.c.WillWrite(id, func() (bool, error) { return false, f.fsys.MkdirAll(f.sdir(id), 0o700) }))
	m := Meta{ID: id, Name: name, CreatedAt: at, UpdatedAt: at, Labels: map[string]string{"n": fmt.Sprint(f.n)}}
	f.write(m)
	return m
}

// write is steps 2 and 3: session.json replaced durably, then the commit.
func (f *fixture) write(m Meta) {
	f.t.Helper()
	b, err := json.Marshal(m)
	require.NoError(f.t, err)
	require.NoError(f.t, durable.ReplaceFile(f.fsys, f.sdir(m.ID), layout.MetaFile, b, 0o600))
	require.NoError(f.t, f.c.Wrote(m))
}

// update changes a session's metadata as UpdateMeta does.
func (f *fixture) update(id uuid.UUID, change func(m *Meta)) {
	f.t.Helper()
	m, _, err := readTestMeta(f.fsys)(f.sdir(id), id, nil)
	require.NoError(f.t, err)
	require.NoError(f.t, f.c.WillWrite(id, nil))
	change(&m)
	f.write(m)
}

// remove deletes a session as Delete does: its directory moved aside
// under the lock, a pending record, no commit.
func (f *fixture) remove(id uuid.UUID) {
	f.t.Helper()
	trash := filepath.Join(testRoot, layout.TrashDir)
	require.NoError(f.t, f.c.WillWrite(id, func() (bool, error) {
		if err := f.fsys.MkdirAll(trash, 0o700); err != nil {
			return false, err
		}
		return false, f.fsys.Rename(f.sdir(id), filepath.Join(trash, id.String()))
	}))
}

// scan is every session as its session.json says, in id order.
func (f *fixture) scan() []Meta {
	f.t.Helper()
	ids, err := SessionIDs(f.fsys, filepath.Join(testRoot, layout.SessionsDir))
	require.NoError(f.t, err)
	var out []Meta
	for _, id := range ids {
		m, _, err := readTestMeta(f.fsys)(f.sdir(id), id, nil)
		if errors.Is(err, ErrAbsent) {
			continue
		}
		require.NoError(f.t, err)
		out = append(out, m)
	}
	return out
}

// listed is every session as a reader of State learns it (List): the
// catalogue's entry while it may be used and session.json's stamp is the
// recorded one, else session.json.
func (f *fixture) listed(st *State) []Meta {
	f.t.Helper()
	ids, err := SessionIDs(f.fsys, filepath.Join(testRoot, layout.SessionsDir))
	require.NoError(f.t, err)
	var out []Meta
	for i, id := range ids {
		e, _, usable := st.Lookup(id, st.Hints(ids)[i])
		if usable && e.Fresh(f.fsys, f.sdir(id)) {
			out = append(out, e.Meta)
			continue
		}
		m, _, err := readTestMeta(f.fsys)(f.sdir(id), id, nil)
		if errors.Is(err, ErrAbsent) {
			continue
		}
		require.NoError(f.t, err)
		out = append(out, m)
	}
	return out
}

// newest is what Backwards hands over, newest first, up to n sessions
// with ids below before (all, for nil), as ListRecent resolves them.
func (f *fixture) newest(c *Catalogue, before *uuid.UUID, n int) ([]Meta, bool) {
	f.t.Helper()
	var out []Meta
	_, ok := c.Backwards(before, func() bool { return len(out) < n }, func(id uuid.UUID, e Entry, usable bool) {
		if usable && e.Fresh(f.fsys, f.sdir(id)) {
			out = append(out, e.Meta)
			return
		}
		m, _, err := readTestMeta(f.fsys)(f.sdir(id), id, nil)
		if errors.Is(err, ErrAbsent) {
			return
		}
		require.NoError(f.t, err)
		out = append(out, m)
	})
	return out, ok
}

func writeFile(t *testing.T, fsys vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

func TestRecordCodec(t *testing.T) {
	id := uuid.MustParse("01a02f3f-a89d-7d25-b4ac-ac89a183258d")
	at := time.Date(2026, 8, 25, 17, 21, 23, 954897183, time.UTC)
	full := Meta{ID: id, Name: "name", WorkingDir: "/w", Model: "m", CreatedAt: at, UpdatedAt: at.Add(time.Second), Labels: map[string]string{"b": "2", "a": "1"}}
	tests := []struct {
		name string
		rec  Record
		line string // the encoding without the crc suffix; "" to skip the check
	}{
		{"header", Record{Kind: KindHeader, Dir: Stamp{5, 4096}, Gen: 7},
			`{"k":"h","dir":[5,4096],"v":2,"gen":7`},
		{"pending", Record{Kind: KindPending, Dir: Stamp{-1, 0}, ID: id},
			`{"k":"p","dir":[-1,0],"id":"01a02f3f-a89d-7d25-b4ac-ac89a183258d","file":[0,0]`},
		{"unreadable", Record{Kind: KindUnreadable, ID: id, File: Stamp{9, 301}},
			`{"k":"u","dir":[0,0],"id":"01a02f3f-a89d-7d25-b4ac-ac89a183258d","file":[9,301]`},
		{"entry", Record{Kind: KindEntry, ID: id, File: Stamp{9, 301}, Meta: full},
			`{"k":"e","dir":[0,0],"id":"01a02f3f-a89d-7d25-b4ac-ac89a183258d","file":[9,301],"created_at":"2026-08-25T17:21:23.954897183Z","updated_at":"2026-08-25T17:21:24.954897183Z","name":"name","working_dir":"/w","model":"m","labels":{"a":"1","b":"2"}`},
		{"commit, empty metadata", Record{Kind: KindCommit, ID: id, File: Stamp{1, 2}, Meta: Meta{ID: id, CreatedAt: at, UpdatedAt: at}},
			`{"k":"c","dir":[0,0],"id":"01a02f3f-a89d-7d25-b4ac-ac89a183258d","file":[1,2],"created_at":"2026-08-25T17:21:23.954897183Z","updated_at":"2026-08-25T17:21:23.954897183Z","name":"","working_dir":"","model":"","labels":{}`},
		{"lineage", Record{Kind: KindEntry, ID: id, File: Stamp{9, 301}, Meta: Meta{ID: id, CreatedAt: at, UpdatedAt: at,
			ForkedFrom:    &ForkPoint{Session: uuid.MustParse("01a02f3f-a89d-7d25-b4ac-000000000001"), Event: uuid.MustParse("01a02f3f-a89d-7d25-b4ac-000000000002")},
			ParentSession: uuid.MustParse("01a02f3f-a89d-7d25-b4ac-000000000003"), SpawnedBy: uuid.MustParse("01a02f3f-a89d-7d25-b4ac-000000000004"), Depth: 2}},
			`{"k":"e","dir":[0,0],"id":"01a02f3f-a89d-7d25-b4ac-ac89a183258d","file":[9,301],"created_at":"2026-08-25T17:21:23.954897183Z","updated_at":"2026-08-25T17:21:23.954897183Z","name":"","working_dir":"","model":"","labels":{},` +
				`"forked_from":["01a02f3f-a89d-7d25-b4ac-000000000001","01a02f3f-a89d-7d25-b4ac-000000000002"],"parent_session":"01a02f3f-a89d-7d25-b4ac-000000000003","spawned_by":"01a02f3f-a89d-7d25-b4ac-000000000004","depth":2`},
		{"parent only", Record{Kind: KindCommit, ID: id, Meta: Meta{ID: id, CreatedAt: at, UpdatedAt: at, ParentSession: uuid.MustParse("01a02f3f-a89d-7d25-b4ac-000000000003"), Depth: 1}},
			`{"k":"c","dir":[0,0],"id":"01a02f3f-a89d-7d25-b4ac-ac89a183258d","file":[0,0],"created_at":"2026-08-25T17:21:23.954897183Z","updated_at":"2026-08-25T17:21:23.954897183Z","name":"","working_dir":"","model":"","labels":{},"parent_session":"01a02f3f-a89d-7d25-b4ac-000000000003","depth":1`},
		{"escapes", Record{Kind: KindEntry, ID: id, Meta: Meta{ID: id, Name: "a \"quoted\"\n\\ name", Model: "é ✓ \t", CreatedAt: at, UpdatedAt: at, Labels: map[string]string{"k\"": "v\x01"}}}, ""},
		{"an offset time", Record{Kind: KindEntry, ID: id, Meta: Meta{ID: id, CreatedAt: time.Date(2020, 1, 2, 3, 4, 5, 0, time.FixedZone("", 3600)), UpdatedAt: at}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := AppendRecord(nil, tt.rec)
			require.True(t, bytes.HasSuffix(b, []byte("\n")))
			if tt.line != "" {
				assert.Equal(t, tt.line, string(b[:len(b)-len(`,"crc":"xxxxxxxx"}`)-1]))
			}
			got, err := DecodeRecord(b[:len(b)-1])
			require.NoError(t, err)
			want := tt.rec
			if hasMeta(want.Kind) {
				want.Meta.ID = want.ID
				if len(want.Meta.Labels) == 0 {
					want.Meta.Labels = nil
				}
			}
			if !hasMeta(want.Kind) {
				want.Meta = Meta{}
			}
			assert.Equal(t, want.Kind, got.Kind)
			assert.Equal(t, want.Dir, got.Dir)
			assert.Equal(t, want.Gen, got.Gen)
			assert.Equal(t, want.ID, got.ID)
			assert.Equal(t, want.File, got.File)
			assert.True(t, want.Meta.CreatedAt.Equal(got.Meta.CreatedAt) && want.Meta.UpdatedAt.Equal(got.Meta.UpdatedAt))
			want.Meta.CreatedAt, want.Meta.UpdatedAt = got.Meta.CreatedAt, got.Meta.UpdatedAt
			assert.Equal(t, want.Meta, got.Meta)
		})
	}

	good := AppendRecord(nil, Record{Kind: KindEntry, ID: id, Meta: full})
	good = good[:len(good)-1]
	reseal := func(body string) []byte { return bytes.TrimSuffix(jsonl.Seal(nil, []byte(body)), []byte("\n")) }
	bad := []struct {
		name string
		line []byte
	}{
		{"empty", nil},
		{"a changed byte", func() []byte { b := bytes.Clone(good); b[20] ^= 1; return b }()},
		{"cut short", good[:len(good)-3]},
		{"unknown kind", reseal(`{"k":"x","dir":[0,0],"id":"01a02f3f-a89d-7d25-b4ac-ac89a183258d","file":[0,0]}`)},
		{"unknown version", reseal(`{"k":"h","dir":[0,0],"v":3,"gen":1}`)},
		{"format 1 header", reseal(`{"k":"h","dir":[0,0],"v":1,"gen":1}`)},
		{"zero depth written", reseal(lineageLine(`,"depth":0`))},
		{"zero parent written", reseal(lineageLine(`,"parent_session":"00000000-0000-0000-0000-000000000000"`))},
		{"lineage out of order", reseal(lineageLine(`,"depth":1,"parent_session":"01a02f3f-a89d-7d25-b4ac-000000000003"`))},
		{"upper-case parent", reseal(lineageLine(`,"parent_session":"01A02F3F-A89D-7D25-B4AC-000000000003"`))},
		{"forked_from cut", reseal(lineageLine(`,"forked_from":["01a02f3f-a89d-7d25-b4ac-000000000001"]`))},
		{"depth too large", reseal(lineageLine(`,"depth":99999999999`))},
		{"upper-case id", reseal(`{"k":"p","dir":[0,0],"id":"01A02F3F-A89D-7D25-B4AC-AC89A183258D","file":[0,0]}`)},
		{"a member more", reseal(`{"k":"p","dir":[0,0],"id":"01a02f3f-a89d-7d25-b4ac-ac89a183258d","file":[0,0],"x":1}`)},
		{"members out of order", reseal(`{"k":"p","id":"01a02f3f-a89d-7d25-b4ac-ac89a183258d","dir":[0,0],"file":[0,0]}`)},
		{"bad time", reseal(`{"k":"c","dir":[0,0],"id":"01a02f3f-a89d-7d25-b4ac-ac89a183258d","file":[0,0],"created_at":"yesterday","updated_at":"2026-08-25T17:21:23Z","name":"","working_dir":"","model":"","labels":{}}`)},
		{"bad escape", reseal(`{"k":"c","dir":[0,0],"id":"01a02f3f-a89d-7d25-b4ac-ac89a183258d","file":[0,0],"created_at":"2026-08-25T17:21:23Z","updated_at":"2026-08-25T17:21:23Z","name":"\q","working_dir":"","model":"","labels":{}}`)},
		{"unterminated labels", reseal(`{"k":"c","dir":[0,0],"id":"01a02f3f-a89d-7d25-b4ac-ac89a183258d","file":[0,0],"created_at":"2026-08-25T17:21:23Z","updated_at":"2026-08-25T17:21:23Z","name":"","working_dir":"","model":"","labels":{"a":"b"}`)},
	}
	for _, tt := range bad {
		t.Run("refused: "+tt.name, func(t *testing.T) {
			_, err := DecodeRecord(tt.line)
			assert.Error(t, err)
		})
	}
}

// lineageLine is a commit line's body with the lineage members given.
func lineageLine(lineage string) string {
	return `{"k":"c","dir":[0,0],"id":"01a02f3f-a89d-7d25-b4ac-ac89a183258d","file":[0,0],"created_at":"2026-08-25T17:21:23Z","updated_at":"2026-08-25T17:21:23Z","name":"","working_dir":"","model":"","labels":{}` + lineage + `}`
}

func FuzzRecord(f *testing.F) {
	id := uuid.MustParse("01a02f3f-a89d-7d25-b4ac-ac89a183258d")
	at := time.Date(2026, 8, 25, 17, 21, 23, 954897183, time.UTC)
	for _, r := range []Record{
		{Kind: KindHeader, Gen: 3, Dir: Stamp{1, 2}},
		{Kind: KindPending, ID: id},
		{Kind: KindUnreadable, ID: id, File: Stamp{3, 4}},
		{Kind: KindCommit, ID: id, Meta: Meta{Name: "n \"q\"", CreatedAt: at, UpdatedAt: at, Labels: map[string]string{"a": "b", "c": "\\"}}},
		{Kind: KindEntry, ID: id, Meta: Meta{CreatedAt: at, UpdatedAt: at, ForkedFrom: &ForkPoint{Session: id, Event: id}, ParentSession: id, SpawnedBy: id, Depth: 3}},
	} {
		b := AppendRecord(nil, r)
		f.Add(b[:len(b)-1])
	}
	f.Add([]byte(`{"k":"e"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := DecodeRecord(line)
		if err != nil {
			return
		}
		// What decodes encodes back to a line that decodes the same.
		b := AppendRecord(nil, r)
		again, err := DecodeRecord(b[:len(b)-1])
		require.NoError(t, err)
		require.Equal(t, r.Kind, again.Kind)
		require.Equal(t, r.ID, again.ID)
		require.Equal(t, r.File, again.File)
		require.Equal(t, r.Dir, again.Dir)
		require.Equal(t, r.Gen, again.Gen)
		if hasMeta(r.Kind) {
			require.Equal(t, r.Meta.Name, again.Meta.Name)
			require.Equal(t, r.Meta.Labels, again.Meta.Labels)
			require.Equal(t, r.Meta.ForkedFrom, again.Meta.ForkedFrom)
			require.Equal(t, r.Meta.ParentSession, again.Meta.ParentSession)
			require.Equal(t, r.Meta.SpawnedBy, again.Meta.SpawnedBy)
			require.Equal(t, r.Meta.Depth, again.Meta.Depth)
			require.True(t, r.Meta.UpdatedAt.Equal(again.Meta.UpdatedAt))
		}
	})
}

// FuzzLog: whatever bytes the log holds, folding it returns a log or an
// error, never a panic; a log it returns ends at its last good line, and
// those bytes alone fold to the same log with no tail.
func FuzzLog(f *testing.F) {
	id := uuid.MustParse("01a02f3f-a89d-7d25-b4ac-ac89a183258d")
	at := time.Date(2026, 8, 25, 17, 21, 23, 0, time.UTC)
	log := AppendRecord(nil, Record{Kind: KindHeader, Gen: 2})
	log = AppendRecord(log, Record{Kind: KindPending, ID: id})
	log = AppendRecord(log, Record{Kind: KindCommit, ID: id, Meta: Meta{ID: id, CreatedAt: at, UpdatedAt: at}})
	f.Add(log)
	f.Add(log[:len(log)-7])
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := parseCatLog(b)
		if err != nil {
			return
		}
		require.LessOrEqual(t, l.size, int64(len(b)))
		again, err := parseCatLog(b[:l.size])
		require.NoError(t, err)
		assert.False(t, again.tail)
		assert.Equal(t, l.size, again.size)
		assert.Equal(t, l.records, again.records)
		assert.Equal(t, l.pending, again.pending)
		assert.Equal(t, l.committed, again.committed)
	})
}

// TestParseUTC: the fast path gives what time.Parse gives, and leaves to
// it what it does not know.
func TestParseUTC(t *testing.T) {
	for _, in := range []string{
		"2026-08-25T17:21:23.954897183Z", "2026-08-25T17:21:23Z", "2026-08-25T17:21:23.5Z", "0001-01-01T00:00:00Z",
		"9999-12-31T23:59:59.999999999Z", "2024-02-29T00:00:00Z", "2026-08-25T17:21:23.000000001Z",
	} {
		want, err := time.Parse(time.RFC3339Nano, in)
		require.NoError(t, err)
		got, ok := parseUTC([]byte(in))
		require.True(t, ok, in)
		assert.Equal(t, want, got, in)
		assert.Equal(t, in, got.Format(time.RFC3339Nano))
	}
	for _, in := range []string{
		"2026-08-25T17:21:23+02:00", "2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-08-25T24:00:00Z",
		"2026-08-25T17:21:23.50Z", "2026-08-25T17:21:23.Z", "2026-08-25 17:21:23Z", "2026-08-25T17:21:2xZ", "short",
	} {
		_, ok := parseUTC([]byte(in))
		assert.False(t, ok, in)
	}
}

// TestLogTail: bytes after the log's last whole line, or bad lines with
// no good line after them, are an unsynced tail; a bad line with good
// ones after it is damage.
func TestLogTail(t *testing.T) {
	f := newFixture(t)
	f.create("a")
	f.create("b")
	b, err := vfs.ReadFile(f.fsys, filepath.Join(testRoot, LogName))
	require.NoError(t, err)
	whole, err := parseCatLog(b)
	require.NoError(t, err)
	require.False(t, whole.tail)

	l, err := parseCatLog(append(bytes.Clone(b), `{"k":"c","dir":[1,`...))
	require.NoError(t, err, "a torn last line is an unsynced tail")
	assert.True(t, l.tail)
	assert.Equal(t, whole.size, l.size, "the log ends after its last whole line")
	assert.Equal(t, whole.committed, l.committed)

	bad := AppendRecord(nil, Record{Kind: KindPending, ID: uuid.New()})
	bad[len(bad)/2] ^= 1
	l, err = parseCatLog(append(bytes.Clone(b), bad...))
	require.NoError(t, err, "a bad last line is an unsynced tail")
	assert.True(t, l.tail)

	damaged := bytes.Clone(b)
	i := bytes.IndexByte(damaged, '\n')
	damaged[i+5] ^= 1 // inside the first record after the header
	_, err = parseCatLog(damaged)
	assert.ErrorIs(t, err, ErrUnusable, "a bad line with good ones after it is damage")
}

// TestFold: the log's compaction (Compact, and the fold a long log
// brings) leaves a snapshot that holds every session as its session.json
// says and no other, and an empty log, whether the snapshot it folds is
// as the last writer left it or not one to fold (then it rebuilds from
// the session.json files): of an older generation, with a damaged line,
// cut short.
func TestFold(t *testing.T) {
	snapPath := filepath.Join(testRoot, Name)
	for _, tc := range []struct {
		name string
		// change makes the snapshot what the case needs, given a copy of
		// an older one.
		change func(t *testing.T, m vfs.FS, older []byte)
	}{
		{"as written", func(*testing.T, vfs.FS, []byte) {}},
		{"of an older generation", func(t *testing.T, m vfs.FS, older []byte) {
			writeFile(t, m, snapPath, older)
		}},
		{"with a damaged line", func(t *testing.T, m vfs.FS, _ []byte) {
			b, err := vfs.ReadFile(m, snapPath)
			require.NoError(t, err)
			i := bytes.Index(b, []byte(`"name":"session 10"`)) // not updated since
			require.Positive(t, i)
			b[i+len(`"name":"session `)] = '8' // its CRC no longer matches
			writeFile(t, m, snapPath, b)
		}},
		{"cut short", func(t *testing.T, m vfs.FS, _ []byte) {
			b, err := vfs.ReadFile(m, snapPath)
			require.NoError(t, err)
			writeFile(t, m, snapPath, b[:len(b)-10])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			var ids []uuid.UUID
			create := func(n int) {
				for range n {
					ids = append(ids, f.create(fmt.Sprint("session ", len(ids))).ID)
				}
			}
			create(140) // folds once, at MaxLog records
			older, err := vfs.ReadFile(f.fsys, snapPath)
			require.NoError(t, err)
			create(120) // folds again
			// The log to fold: new sessions, sessions updated and deleted
			// since the last fold, among them some the snapshot holds.
			create(5)
			for _, id := range ids[3:6] {
				f.update(id, func(m *Meta) { m.Model = "updated" })
			}
			for _, id := range []uuid.UUID{ids[7], ids[len(ids)-1]} {
				f.remove(id)
			}
			tc.change(t, f.fsys, older)

			require.NoError(t, f.c.Compact())

			want := f.scan()
			require.Len(t, want, len(ids)-2)
			st, err := Load(f.fsys, testRoot)
			require.NoError(t, err, "the catalogue is usable")
			assert.Empty(t, st.log.committed, "the log's commits are in the snapshot")
			assert.Empty(t, st.log.pending, "no pending record is open")
			var got []Meta
			for i, id := range st.snap.ids {
				assert.False(t, st.snap.entries[i].Unreadable)
				m := st.snap.entries[i].Meta
				assert.Equal(t, id, m.ID)
				got = append(got, m)
			}
			assert.Equal(t, want, got, "the snapshot holds every session as its session.json says, and no other")
			assert.Equal(t, want, f.listed(st))
		})
	}
}

// TestRebuild: a catalogue missing, damaged or of two generations is
// rebuilt by a writer's State from the session.json files, keeping the
// open pending records of a log it can still read (a writer between its
// steps 1 and 3); a read-only one answers nil and writes nothing.
func TestRebuild(t *testing.T) {
	for _, tc := range []struct {
		name        string
		change      func(t *testing.T, m *vfs.MemFS)
		keepPending bool
	}{
		{"snapshot missing", func(t *testing.T, m *vfs.MemFS) {
			require.NoError(t, m.Remove(filepath.Join(testRoot, Name)))
		}, true},
		{"both missing", func(t *testing.T, m *vfs.MemFS) {
			require.NoError(t, m.Remove(filepath.Join(testRoot, Name)))
			require.NoError(t, m.Remove(filepath.Join(testRoot, LogName)))
		}, false},
		{"snapshot damaged", func(t *testing.T, m *vfs.MemFS) {
			b, err := vfs.ReadFile(m, filepath.Join(testRoot, Name))
			require.NoError(t, err)
			b[len(b)/2] ^= 1
			writeFile(t, m, filepath.Join(testRoot, Name), b)
		}, true},
		{"the log of an older generation", func(t *testing.T, m *vfs.MemFS) {
			b := AppendRecord(nil, Record{Kind: KindHeader, Gen: 0})
			writeFile(t, m, filepath.Join(testRoot, LogName), b)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			var metas []Meta
			for i := range 5 {
				metas = append(metas, f.create(fmt.Sprint("session ", i)))
			}
			f.update(metas[1].ID, func(m *Meta) { m.Name = "renamed" })
			open := metas[2].ID
			require.NoError(t, f.c.WillWrite(open, nil)) // and no commit yet
			tc.change(t, f.fsys)
			want := f.scan()

			files := func() map[string][]byte {
				out := map[string][]byte{}
				for _, name := range []string{Name, LogName} {
					b, err := vfs.ReadFile(f.fsys, filepath.Join(testRoot, name))
					if err == nil {
						out[name] = b
					}
				}
				return out
			}
			before := files()
			assert.Nil(t, f.open(true).State(), "a read-only catalogue cannot answer")
			assert.Equal(t, before, files(), "and writes nothing")

			st := f.open(false).State()
			require.NotNil(t, st)
			assert.Equal(t, want, f.listed(st))
			assert.Equal(t, tc.keepPending, st.Pending(open), "the open pending record")
			again, err := Load(f.fsys, testRoot)
			require.NoError(t, err, "the rebuilt catalogue is usable")
			assert.Equal(t, want, f.listed(again))
			for _, m := range want {
				e, ok, usable := again.Lookup(m.ID, -1)
				if m.ID == open && tc.keepPending {
					assert.False(t, ok || usable, "a pending id is read from session.json")
					continue
				}
				require.True(t, ok && usable, "the catalogue knows %s", m.Name)
				assert.Equal(t, m, e.Meta, "as its session.json says")
			}
		})
	}
}

// TestBackwards: Backwards hands over the sessions newest first, from
// the log and the snapshot merged, below a cursor anywhere in a snapshot
// of many blocks; and cannot answer when the sessions directory changed
// behind the catalogue.
func TestBackwards(t *testing.T) {
	f := newFixture(t)
	var metas []Meta
	for i := range 700 { // a snapshot of several search spans
		metas = append(metas, f.create(fmt.Sprint("session ", i)))
	}
	for _, i := range []int{3, 350, 698} { // in the log after the last fold
		f.update(metas[i].ID, func(m *Meta) { m.Model = "updated" })
		metas[i].Model = "updated"
	}
	newestFirst := func(below int, n int) []Meta {
		var out []Meta
		for i := below - 1; i >= 0 && len(out) < n; i-- {
			out = append(out, metas[i])
		}
		return out
	}
	r := f.open(true)
	got, ok := f.newest(r, nil, 10)
	require.True(t, ok)
	assert.Equal(t, newestFirst(len(metas), 10), got)
	for _, at := range []int{1, 4, 351, 500, 699} {
		got, ok := f.newest(r, &metas[at].ID, 40)
		require.True(t, ok)
		assert.Equal(t, newestFirst(at, 40), got, "below %d", at)
	}

	// A session directory added behind the catalogue.
	require.NoError(t, f.fsys.MkdirAll(f.sdir(uuid.Must(uuid.NewV7())), 0o700))
	_, ok = f.newest(r, nil, 10)
	assert.False(t, ok, "the sessions directory's stamp is not the one recorded")
}

// TestWritersAtOnce: goroutines of two Catalogues of the same files (two
// Stores) create and update sessions at once, their appends batched; then
// the catalogue holds every session as its session.json does, with no
// pending record left open: every record of both is in the log (no
// writer wrote over another's; no fold or rebuild rewrote the log from
// the session.json files meanwhile).
func TestWritersAtOnce(t *testing.T) {
	f := newFixture(t)
	cats := []*Catalogue{f.c, f.open(false)}
	const perWriter = 7 // 224 records: no fold rewrites what the writers appended
	errs := make(chan error, 8*perWriter)
	var wg sync.WaitGroup
	for w := range 8 {
		c := cats[w%2]
		wg.Go(func() {
			for i := range perWriter {
				id := uuid.Must(uuid.NewV7())
				sdir := f.sdir(id)
				m := Meta{ID: id, Name: fmt.Sprintf("writer %d session %d", w, i), CreatedAt: time.Unix(int64(i), 0).UTC(), UpdatedAt: time.Unix(int64(i), 0).UTC()}
				for _, name := range []string{m.Name, m.Name + " renamed"} {
					m.Name = name
					if err := c.WillWrite(id, func() (bool, error) { return false, f.fsys.MkdirAll(sdir, 0o700) }); err != nil {
						errs <- err
						return
					}
					b, err := json.Marshal(m)
					if err == nil {
						err = durable.ReplaceFile(f.fsys, sdir, layout.MetaFile, b, 0o600)
					}
					if err == nil {
						err = c.Wrote(m)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	want := f.scan()
	require.Len(t, want, 8*perWriter)
	st, err := Load(f.fsys, testRoot)
	require.NoError(t, err)
	assert.Zero(t, st.PendingLen(), "every pending record has its commit")
	for _, m := range want {
		e, ok, usable := st.Lookup(m.ID, -1)
		require.True(t, ok && usable, "the catalogue knows %s", m.Name)
		assert.Equal(t, m, e.Meta)
		assert.True(t, e.Fresh(f.fsys, f.sdir(m.ID)), "with session.json's stamp")
	}
}

// TestEachCurrent: Each hands over every session in id order, the log's
// ids merged with the snapshot's, a pending one (being written, or
// deleted) as not usable; Current holds until the sessions directory
// changes behind the catalogue.
func TestEachCurrent(t *testing.T) {
	f := newFixture(t)
	var metas []Meta
	for i := range 5 {
		metas = append(metas, f.create(fmt.Sprint("session ", i)))
	}
	require.NoError(t, f.c.Compact()) // metas in the snapshot
	metas = append(metas, f.create("in the log only"))
	f.update(metas[1].ID, func(m *Meta) { m.Model = "updated" })
	metas[1].Model = "updated"
	require.NoError(t, f.c.WillWrite(metas[2].ID, nil)) // a write in progress
	f.remove(metas[3].ID)

	r := f.open(true)
	st := r.State()
	require.NotNil(t, st)
	assert.True(t, r.Current(st))
	var ids []uuid.UUID
	var got []Meta
	var unusable []uuid.UUID
	st.Each(func(id uuid.UUID, e Entry, usable bool) {
		ids = append(ids, id)
		if usable {
			got = append(got, e.Meta)
		} else {
			unusable = append(unusable, id)
		}
	})
	assert.Equal(t, []uuid.UUID{metas[0].ID, metas[1].ID, metas[2].ID, metas[3].ID, metas[4].ID, metas[5].ID}, ids)
	assert.Equal(t, []uuid.UUID{metas[2].ID, metas[3].ID}, unusable)
	assert.Equal(t, []Meta{metas[0], metas[1], metas[4], metas[5]}, got)
	assert.GreaterOrEqual(t, st.Len(), len(ids))

	require.NoError(t, f.fsys.MkdirAll(f.sdir(uuid.Must(uuid.NewV7())), 0o700))
	assert.False(t, r.Current(st), "a session directory added behind the catalogue")
}

// TestTailNotCurrent: a byte that joins the log's last two lines (a
// synced pending record and its commit) makes them one bad line, which
// reads as an unsynced tail; the entry before them is then stale, so
// neither Current nor Backwards may take the catalogue for current until
// a writer rewrites the log.
func TestTailNotCurrent(t *testing.T) {
	f := newFixture(t)
	m := f.create("session")
	f.update(m.ID, func(m *Meta) { m.Model = "updated" }) // a pending record and its commit, last in the log
	logPath := filepath.Join(testRoot, LogName)
	b, err := vfs.ReadFile(f.fsys, logPath)
	require.NoError(t, err)
	lines := bytes.SplitAfter(b, []byte("\n"))
	require.GreaterOrEqual(t, len(lines), 3)
	nl := len(b) - len(lines[len(lines)-2]) - 1 // the newline before the last line
	require.Equal(t, byte('\n'), b[nl])

	r := f.open(true)
	st := r.State()
	require.NotNil(t, st)
	require.True(t, r.Current(st), "before the damage")
	_, ok := f.newest(r, nil, 10)
	require.True(t, ok)

	b[nl] ^= 0x20
	writeFile(t, f.fsys, logPath, b)
	st = r.State()
	require.NotNil(t, st, "a bad last line reads as a tail")
	e, found, usable := st.Lookup(m.ID, -1)
	require.True(t, found && usable)
	require.NotEqual(t, "updated", e.Meta.Model, "the entry before the joined lines")
	assert.False(t, r.Current(st), "a log with an ignored tail is not current")
	_, ok = f.newest(r, nil, 10)
	assert.False(t, ok, "nor does Backwards answer")

	// A writer (another Store: this one's view of the log ends before
	// the damage) rewrites the log, and the catalogue is current again.
	f.c = f.open(false)
	f.update(m.ID, func(m *Meta) { m.Model = "again" })
	st = r.State()
	require.NotNil(t, st)
	assert.True(t, r.Current(st), "after a writer's rewrite")
	got, ok := f.newest(r, nil, 10)
	assert.True(t, ok)
	if assert.Len(t, got, 1) {
		assert.Equal(t, "again", got[0].Model)
	}
}
