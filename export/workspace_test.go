package export

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// bigFile is a workspace file over the fixture store's blob threshold.
var bigFile = []byte(strings.Repeat("func f() {}\n", 100))

// snapshotSession writes a session with three snapshots on two branches:
//
//	u1 - s1 (a, b, c/big, same) - a2 - s2 (a changed, b removed, e added)
//	   \- s1 ... u3 - s3 (a changed otherwise, mode 0755; f = b's content)
//
// s3's branch starts at s1. It returns the session and the events by
// name.
func snapshotSession(t testing.TB, st *sessionstore.Store) (uuid.UUID, map[string]uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	m, err := st.Create(ctx, sessionstore.Meta{Name: "snapshots"})
	require.NoError(t, err)
	s := m.ID
	ids := map[string]uuid.UUID{}
	ev, err := st.Append(ctx, s, sessionstore.UserText("start"))
	require.NoError(t, err)
	ids["u1"] = ev.ID
	ev, err = st.RecordFiles(ctx, s, "one",
		sessionstore.FileWrite{Path: "a.txt", Data: []byte("alpha\n")},
		sessionstore.FileWrite{Path: "b.txt", Data: []byte("beta\n")},
		sessionstore.FileWrite{Path: "c/big.go", Data: bigFile},
		sessionstore.FileWrite{Path: "same.txt", Data: []byte("alpha\n")}, // a's content: one element
		sessionstore.FileWrite{Path: "empty", Data: nil},
	)
	require.NoError(t, err)
	ids["s1"] = ev.ID
	ev, err = st.Append(ctx, s, sessionstore.AssistantText("edited"))
	require.NoError(t, err)
	ids["a2"] = ev.ID
	ev, err = st.RecordFiles(ctx, s, "two",
		sessionstore.FileWrite{Path: "a.txt", Data: []byte("alpha 2\n")},
		sessionstore.FileWrite{Path: "b.txt", Deleted: true},
		sessionstore.FileWrite{Path: "e/new.txt", Data: []byte("new\n")},
	)
	require.NoError(t, err)
	ids["s2"] = ev.ID
	require.NoError(t, st.Branch(ctx, s, ids["s1"]))
	ev, err = st.Append(ctx, s, sessionstore.UserText("the other way"))
	require.NoError(t, err)
	ids["u3"] = ev.ID
	ev, err = st.RecordFiles(ctx, s, "three",
		sessionstore.FileWrite{Path: "a.txt", Data: []byte("alpha B\n"), Mode: 0o755},
		sessionstore.FileWrite{Path: "f.txt", Data: []byte("beta\n")},
	)
	require.NoError(t, err)
	ids["s3"] = ev.ID
	return s, ids
}

// exported is an export read back: its events and each snapshot's
// contents.
type exported struct {
	header   Header
	events   []sessionstore.Event
	contents map[uuid.UUID][]Content // by event; only the events with "files"
}

func readExport(t *testing.T, data []byte) exported {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), "test")
	require.NoError(t, err)
	x := exported{header: r.Header(), contents: map[uuid.UUID][]Content{}}
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		x.events = append(x.events, ev)
		if c := r.Contents(); c != nil {
			x.contents[ev.ID] = c
		}
	}
	return x
}

// recreate writes the export x into a new session of dst, as an import of
// the format would: each event with its id under its parent (AppendWith),
// each snapshot with RecordFiles from its manifest and contents (a new
// id). It returns the new id of each event.
func recreate(t *testing.T, dst *sessionstore.Store, x exported, blobDir string) (uuid.UUID, map[uuid.UUID]uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	m, err := dst.Create(ctx, sessionstore.Meta{Name: x.header.Session.Name})
	require.NoError(t, err)
	s := m.ID
	idmap := map[uuid.UUID]uuid.UUID{}
	for _, ev := range x.events {
		parent := idmap[ev.ParentID]
		if next, _, err := dst.NextParent(ctx, s); err == nil && next != parent {
			require.NoError(t, dst.Branch(ctx, s, parent))
		}
		if ev.Record == nil {
			ev.Record, err = ReadBlob(blobDir, ev)
			require.NoError(t, err)
		}
		man, ok, err := ParseManifest(ev)
		require.NoError(t, err)
		if !ok {
			ev.ParentID, ev.BranchFrom, ev.Digest, ev.Size = uuid.Nil, uuid.Nil, "", 0
			out, err := dst.AppendWith(ctx, s, sessionstore.AppendOptions{KeepTime: true}, ev)
			require.NoError(t, err)
			idmap[ev.ID] = out[0].ID
			continue
		}
		cs, ok := x.contents[ev.ID]
		require.True(t, ok, "snapshot %s has its contents", ev.ID)
		data := map[string][]byte{}
		for _, c := range cs {
			b, err := ReadContent(blobDir, c)
			require.NoError(t, err)
			data[c.Digest] = b
		}
		var writes []sessionstore.FileWrite
		listed := map[string]bool{}
		for _, f := range man.Files {
			listed[f.Path] = true
			if f.Deleted {
				writes = append(writes, sessionstore.FileWrite{Path: f.Path, Deleted: true})
				continue
			}
			b, ok := data[f.Digest]
			require.True(t, ok, "the content of %s", f.Path)
			writes = append(writes, sessionstore.FileWrite{Path: f.Path, Data: b, Mode: f.Mode})
		}
		if man.Full {
			base, err := dst.Files(ctx, s, parent)
			require.NoError(t, err)
			for _, f := range base.Files {
				if !listed[f.Path] {
					writes = append(writes, sessionstore.FileWrite{Path: f.Path, Deleted: true})
				}
			}
		}
		out, err := dst.RecordFiles(ctx, s, man.Label, writes...)
		require.NoError(t, err)
		idmap[ev.ID] = out.ID
	}
	return s, idmap
}

// workspaceOf is the files of session s as of event at: path to mode and
// content.
func workspaceOf(t *testing.T, st *sessionstore.Store, s, at uuid.UUID) map[string]string {
	t.Helper()
	ctx := context.Background()
	ws, err := st.Files(ctx, s, at)
	require.NoError(t, err)
	out := map[string]string{}
	for _, f := range ws.Files {
		b, err := st.ReadFile(ctx, s, f)
		require.NoError(t, err)
		out[f.Path] = fs.FileMode(f.Mode).String() + " " + string(b)
	}
	return out
}

// TestJSONLSnapshotsRoundTrip: a session with snapshots on two branches,
// exported with its contents inline and as files, reads back with every
// snapshot's contents, and recreated from the export into another store
// has the same workspace as of every event, on both branches.
func TestJSONLSnapshotsRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s, names := snapshotSession(t, st)
	for _, files := range []bool{false, true} {
		name := "inline"
		if files {
			name = "files"
		}
		t.Run(name, func(t *testing.T) {
			opts := Options{}
			if files {
				opts.BlobDir = filepath.Join(t.TempDir(), "blobs")
			}
			var buf bytes.Buffer
			stats, err := JSONL(ctx, &buf, st, s, opts)
			require.NoError(t, err)
			x := readExport(t, buf.Bytes())
			require.Len(t, x.contents, 3, "three snapshots, each with its contents")
			// s1 names five files, four contents (a and same are one);
			// s2 two (b removed); s3 two.
			assert.Len(t, x.contents[names["s1"]], 4)
			assert.Len(t, x.contents[names["s2"]], 2)
			assert.Len(t, x.contents[names["s3"]], 2)
			assert.Equal(t, 8, stats.FileContents)
			for id, cs := range x.contents {
				for _, c := range cs {
					if files {
						assert.Nil(t, c.Data, "no data in the line: a file")
					} else {
						assert.NotNil(t, c.Data)
					}
					b, err := ReadContent(opts.BlobDir, c)
					require.NoError(t, err, "event %s", id)
					assert.Equal(t, c.Size, int64(len(b)))
				}
			}
			if files {
				// Contents once each: alpha, beta, big, empty, alpha 2,
				// new, alpha B (f.txt is beta again); and s1's manifest,
				// a record over the blob threshold.
				require.Equal(t, 1, stats.Blobs)
				entries, err := os.ReadDir(opts.BlobDir)
				require.NoError(t, err)
				assert.Len(t, entries, 8)
				assert.Equal(t, 8, stats.BlobFiles)
				again, err := JSONL(ctx, io.Discard, st, s, opts)
				require.NoError(t, err)
				assert.Equal(t, 0, again.BlobFiles)
				assert.Equal(t, 8, again.BlobsPresent)
			} else {
				assert.Contains(t, buf.String(), `"data":"`+base64.StdEncoding.EncodeToString([]byte("alpha\n"))+`"`)
				assert.Contains(t, buf.String(), `{"digest":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","size":0,"data":""}`, "the empty file")
			}

			dst, err := sessionstore.Open(t.TempDir(), nil)
			require.NoError(t, err)
			defer dst.Close()
			d, idmap := recreate(t, dst, x, opts.BlobDir)
			require.Len(t, idmap, len(names))
			for name, id := range names {
				assert.Equal(t, workspaceOf(t, st, s, id), workspaceOf(t, dst, d, idmap[id]), "as of %s", name)
			}
			assert.Equal(t, map[string]string{
				"a.txt": "-rw-r--r-- alpha 2\n", "c/big.go": "-rw-r--r-- " + string(bigFile), "same.txt": "-rw-r--r-- alpha\n",
				"empty": "-rw-r--r-- ", "e/new.txt": "-rw-r--r-- new\n",
			}, workspaceOf(t, dst, d, idmap[names["s2"]]))
			assert.Equal(t, "-rwxr-xr-x alpha B\n", workspaceOf(t, dst, d, idmap[names["s3"]])["a.txt"], "the other branch")
			assert.Equal(t, "-rw-r--r-- beta\n", workspaceOf(t, dst, d, idmap[names["s3"]])["b.txt"], "b is removed on the first branch only")
			for _, name := range []string{"s1", "s2", "s3"} {
				ev, err := dst.Event(ctx, d, idmap[names[name]])
				require.NoError(t, err)
				man, ok, err := ParseManifest(ev)
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, map[string]string{"s1": "one", "s2": "two", "s3": "three"}[name], man.Label)
			}
		})
	}
}

// TestJSONLSnapshotsScopes: the active path and the context carry the
// contents of the snapshots they hold.
func TestJSONLSnapshotsScopes(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s, names := snapshotSession(t, st)
	for _, scope := range []Scope{ActivePath, Context} {
		var buf bytes.Buffer
		_, err := JSONL(ctx, &buf, st, s, Options{Scope: scope})
		require.NoError(t, err)
		x := readExport(t, buf.Bytes())
		assert.Equal(t, []uuid.UUID{names["u1"], names["s1"], names["u3"], names["s3"]}, ids(x.events), "scope %s", scope)
		assert.Len(t, x.contents, 2, "scope %s", scope)
		assert.Len(t, x.contents[names["s1"]], 4)
		assert.Len(t, x.contents[names["s3"]], 2)
	}
}

// TestJSONLSnapshotsOmitFiles: with OmitFiles the snapshots are their
// manifests alone, lines as exports wrote them before they carried
// contents; such an export reads back, Contents nil.
func TestJSONLSnapshotsOmitFiles(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s, names := snapshotSession(t, st)
	var buf bytes.Buffer
	stats, err := JSONL(ctx, &buf, st, s, Options{OmitFiles: true})
	require.NoError(t, err)
	assert.Zero(t, stats.FileContents)
	assert.NotContains(t, buf.String(), `"files":[{"digest"`)
	x := readExport(t, buf.Bytes())
	assert.Empty(t, x.contents)
	assert.Len(t, x.events, len(names))
	for _, ev := range x.events {
		line, err := json.Marshal(newEventLine(ev))
		require.NoError(t, err)
		assert.Contains(t, buf.String(), string(line)+"\n", "an event line as before")
	}
}

// TestJSONLSnapshotsEncrypted: an encrypted session's snapshots export
// their plain contents, named by their plain digests.
func TestJSONLSnapshotsEncrypted(t *testing.T) {
	ctx := context.Background()
	keys, err := sessionstore.NewLocalKeys("local:1", map[string][]byte{"local:1": bytes.Repeat([]byte{7}, 32)})
	require.NoError(t, err)
	st, err := sessionstore.Open(t.TempDir(), &sessionstore.Options{Keys: keys})
	require.NoError(t, err)
	defer st.Close()
	s, names := snapshotSession(t, st)
	for _, blobDir := range []string{"", filepath.Join(t.TempDir(), "blobs")} {
		var buf bytes.Buffer
		_, err = JSONL(ctx, &buf, st, s, Options{BlobDir: blobDir})
		require.NoError(t, err)
		x := readExport(t, buf.Bytes())
		require.Len(t, x.contents, 3)
		dst, err := sessionstore.Open(t.TempDir(), nil)
		require.NoError(t, err)
		d, idmap := recreate(t, dst, x, blobDir)
		for name, id := range names {
			assert.Equal(t, workspaceOf(t, st, s, id), workspaceOf(t, dst, d, idmap[id]), "as of %s", name)
		}
		require.NoError(t, dst.Close())
	}
}

// TestReaderContentsErrors: a snapshot line whose contents are not what
// its manifest names, or not well formed, is refused at its line.
func TestReaderContentsErrors(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s, names := snapshotSession(t, st)
	var inline, files bytes.Buffer
	_, err := JSONL(ctx, &inline, st, s, Options{Scope: ActivePath})
	require.NoError(t, err)
	_, err = JSONL(ctx, &files, st, s, Options{Scope: ActivePath, BlobDir: t.TempDir()})
	require.NoError(t, err)
	// The path: header, u1, s1, u3, s3; s3 is line 5.
	s3 := func(in string) (pre, line string) {
		ls := strings.SplitAfter(in, "\n")
		require.Contains(t, ls[4], names["s3"].String())
		return strings.Join(ls[:4], ""), ls[4]
	}
	alphaB := base64.StdEncoding.EncodeToString([]byte("alpha B\n"))
	for _, tc := range []struct {
		name, in string
		edit     func(line string) string
	}{
		{"data changed", inline.String(), func(l string) string {
			return strings.Replace(l, alphaB, base64.StdEncoding.EncodeToString([]byte("alpha C\n")), 1)
		}},
		{"not base64", inline.String(), func(l string) string { return strings.Replace(l, alphaB, "!!", 1) }},
		{"no data inline", inline.String(), func(l string) string { return strings.Replace(l, `,"data":"`+alphaB+`"`, "", 1) }},
		{"a content missing", inline.String(), func(l string) string {
			i := strings.Index(l, `,"files":[`)
			j := strings.Index(l[i:], "},{")
			return l[:i] + `,"files":[` + l[i+j+3:]
		}},
		{"no contents", inline.String(), func(l string) string {
			return l[:strings.Index(l, `,"files":[`)] + `,"files":[]}` + "\n"
		}},
		{"size changed", inline.String(), func(l string) string { return strings.Replace(l, `"size":8,"data"`, `"size":9,"data"`, 1) }},
		{"data in an export of files", files.String(), func(l string) string {
			return strings.Replace(l, `"size":8}`, `"size":8,"data":"`+alphaB+`"}`, 1)
		}},
		{"a bad digest", files.String(), func(l string) string {
			i := strings.Index(l, `,"files":[{"digest":"sha256:`) + len(`,"files":[{"digest":"sha256:`)
			return l[:i] + "../../x" + l[i+64:]
		}},
		{"an unknown member", inline.String(), func(l string) string { return strings.Replace(l, `,"files":[{`, `,"files":[{"mode":1,`, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pre, line := s3(tc.in)
			edited := tc.edit(line)
			require.NotEqual(t, line, edited)
			err := readErr(pre + edited)
			require.ErrorIs(t, err, ErrFormat)
			var pe *ParseError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, 5, pe.Line)
		})
	}
	// Contents on an event that is no snapshot.
	pre, _ := s3(inline.String())
	ls := strings.SplitAfter(pre, "\n")
	ls[3] = strings.TrimSuffix(ls[3], "}\n") + `,"files":[]}` + "\n" // u3
	err = readErr(strings.Join(ls, "") + "\n")
	require.ErrorIs(t, err, ErrFormat)
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 4, pe.Line)
	assert.NoError(t, readErr(inline.String()))
	assert.NoError(t, readErr(files.String()))
}

// TestReadContentErrors: ReadContent refuses a file that is missing or
// does not match, and a digest that is not one.
func TestReadContentErrors(t *testing.T) {
	dir := t.TempDir()
	c := Content{Digest: "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", Size: 0}
	_, err := ReadContent(dir, c)
	assert.ErrorIs(t, err, ErrBlobFile)
	require.NoError(t, writeFile(filepath.Join(dir, "sha256-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), []byte("x")))
	_, err = ReadContent(dir, c)
	assert.ErrorIs(t, err, ErrFormat)
	c.Data = []byte{}
	b, err := ReadContent(dir, c)
	require.NoError(t, err, "the data in hand")
	assert.Empty(t, b)
	c.Data = []byte("x")
	_, err = ReadContent(dir, c)
	assert.ErrorIs(t, err, ErrFormat)
	_, err = ReadContent(dir, Content{Digest: "sha256:../../etc/passwd"})
	assert.ErrorIs(t, err, ErrFormat)
}

// TestParseManifest: a custom record that starts as a manifest but does
// not decode as one is an error; other events are no manifest.
func TestParseManifest(t *testing.T) {
	_, ok, err := ParseManifest(sessionstore.UserText(`{"sessionstore":"snapshot"}`))
	assert.False(t, ok)
	assert.NoError(t, err)
	ev := sessionstore.Event{Kind: sessionstore.KindCustom, Record: json.RawMessage(`{"sessionstore":"snapshot","files":[{"path":"a","digest":"md5:1"}]}`)}
	_, ok, err = ParseManifest(ev)
	assert.True(t, ok)
	assert.ErrorIs(t, err, ErrFormat)
	ev.Record = json.RawMessage(`{"sessionstore":"snapshot","files":3}`)
	_, _, err = ParseManifest(ev)
	assert.ErrorIs(t, err, ErrFormat)
	ev.Record = json.RawMessage(`{"sessionstore":"state"}`)
	_, ok, err = ParseManifest(ev)
	assert.False(t, ok)
	assert.NoError(t, err)
}
