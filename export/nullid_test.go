package export

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// nilID is what an export never writes for "no event": it writes null.
var nilID = uuid.Nil.String()

// TestJSONLNullForNoEvent: a root's parent_id, the HEAD of a session
// without events and a lane without a tip are null in the lines, never
// the nil uuid, in every scope; Reader reads them as uuid.Nil.
func TestJSONLNullForNoEvent(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s := fixture(t, st)
	for _, scope := range []Scope{Tree, ActivePath} {
		var buf bytes.Buffer
		_, err := JSONL(ctx, &buf, st, s, Options{Scope: scope})
		require.NoError(t, err)
		assert.NotContains(t, buf.String(), nilID, "scope %s", scope)
		lines := strings.Split(buf.String(), "\n")
		require.Greater(t, len(lines), 2)
		assert.True(t, strings.HasPrefix(lines[1], `{"id":"`+eid(1).String()+`","parent_id":null,"kind":"message",`), "scope %s: %s", scope, lines[1])
		_, evs := readAll(t, buf.Bytes())
		assert.Equal(t, uuid.Nil, evs[0].ParentID, "scope %s", scope)
	}

	empty, err := st.Create(ctx, sessionstore.Meta{Name: "empty"})
	require.NoError(t, err)
	var buf bytes.Buffer
	_, err = JSONL(ctx, &buf, st, empty.ID, Options{})
	require.NoError(t, err)
	assert.NotContains(t, buf.String(), nilID)
	assert.Contains(t, buf.String(), `,"head":null,"events":0}`)
	h, _ := readAll(t, buf.Bytes())
	assert.Equal(t, uuid.Nil, h.Head)

	// A lane without a tip (a lane call cannot make one; the header type
	// can hold one).
	b, err := json.Marshal(newHeaderLine(Header{Session: sessionstore.Meta{ID: fixtureSession}, Lanes: []Lane{{Name: "main", Active: true}}}))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"lanes":[{"name":"main","tip":null,"active":true}]`)
	assert.NotContains(t, string(b), nilID)
}

// TestReaderNilUUIDAndNull: Reader reads the exports written before null
// stood for "no event" (the nil uuid) and those written since (null) to
// the same header and events.
func TestReaderNilUUIDAndNull(t *testing.T) {
	header := strings.Replace(goodHeader, `"head":"01a039f0-0000-7000-8000-000000000002","events":2`, `"head":"`+nilID+`","events":2`, 1)
	require.NotEqual(t, goodHeader, header)
	old := strings.Join([]string{header, rootEvent, childEvent}, "\n") + "\n"
	require.Contains(t, rootEvent, `"parent_id":"`+nilID+`"`)
	nullForm := strings.ReplaceAll(old, `"`+nilID+`"`, "null")
	require.NotEqual(t, old, nullForm)
	require.NotContains(t, nullForm, nilID)

	var want []sessionstore.Event
	var wantHeader Header
	for i, input := range []string{old, nullForm} {
		h, evs := readAll(t, []byte(input))
		require.Len(t, evs, 2)
		assert.Equal(t, uuid.Nil, h.Head)
		assert.Equal(t, uuid.Nil, evs[0].ParentID)
		if i == 0 {
			want, wantHeader = evs, h
			continue
		}
		assert.Equal(t, wantHeader, h)
		assert.Equal(t, want, evs)
	}
}

// TestEventLineIsEventJSON: an event line is sessionstore.Event's
// encoding/json form byte for byte when the event has a parent, and
// eventLine has Event's members in Event's order, so that a member added
// to Event is not left out of exports unnoticed.
func TestEventLineIsEventJSON(t *testing.T) {
	jsonNames := func(typ reflect.Type) []string {
		var names []string
		for f := range typ.Fields() {
			if !f.IsExported() {
				continue
			}
			names = append(names, f.Tag.Get("json"))
		}
		return names
	}
	assert.Equal(t, jsonNames(reflect.TypeFor[sessionstore.Event]()), jsonNames(reflect.TypeFor[eventLine]()))
	assert.Equal(t, jsonNames(reflect.TypeFor[Header]()), jsonNames(reflect.TypeFor[headerLine]()))
	assert.Equal(t, jsonNames(reflect.TypeFor[Lane]()), jsonNames(reflect.TypeFor[laneLine]()))

	ctx := context.Background()
	st := openStore(t)
	s := fixture(t, st)
	nodes, err := st.Tree(ctx, s)
	require.NoError(t, err)
	for _, n := range nodes {
		ev, err := st.Event(ctx, s, n.ID)
		require.NoError(t, err)
		ev, err = st.Resolve(ctx, s, ev)
		require.NoError(t, err)
		for _, blob := range []bool{false, true} {
			if blob && ev.Digest == "" {
				continue
			}
			if blob {
				ev.Record = nil
			}
			want, err := json.Marshal(ev)
			require.NoError(t, err)
			got, err := json.Marshal(newEventLine(ev))
			require.NoError(t, err)
			if ev.ParentID == uuid.Nil {
				want = bytes.Replace(want, []byte(`"parent_id":"`+nilID+`"`), []byte(`"parent_id":null`), 1)
			}
			assert.Equal(t, string(want), string(got))
		}
	}
}

// updatedAt is the session's updated_at in a header line: the time of the
// last write, which the golden file does not fix.
var updatedAt = regexp.MustCompile(`"updated_at":"[^"]*"`)

// TestJSONLGolden: the fixture's tree export, byte for byte but for the
// session's updated_at (run with -update to rewrite it after a deliberate
// change).
func TestJSONLGolden(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s := fixture(t, st)
	var buf bytes.Buffer
	_, err := JSONL(ctx, &buf, st, s, Options{})
	require.NoError(t, err)
	require.Equal(t, 1, len(updatedAt.FindAll(buf.Bytes(), -1)))
	got := updatedAt.ReplaceAllString(buf.String(), `"updated_at":"<updated>"`)
	golden := filepath.Join("testdata", "tree.jsonl")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), got)

	// The golden file reads back, with updated_at made a time again.
	readAll(t, []byte(strings.Replace(string(want), `"<updated>"`, `"`+time.Unix(0, 0).UTC().Format(time.RFC3339)+`"`, 1)))
}

// TestMarkdownNoHead: the transcript of a session without events names
// no HEAD ("-", as the inspector's text output says none), not the nil
// uuid's short id, in either scope.
func TestMarkdownNoHead(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	empty, err := st.Create(ctx, sessionstore.Meta{Name: "empty"})
	require.NoError(t, err)
	for _, scope := range []Scope{ActivePath, Context} {
		var buf bytes.Buffer
		_, err := Markdown(ctx, &buf, st, empty.ID, Options{Scope: scope})
		require.NoError(t, err)
		assert.NotContains(t, buf.String(), "`"+sessionstore.ShortID(uuid.Nil)+"`", "scope %s", scope)
		assert.Contains(t, buf.String(), ", 0 events of 0, HEAD -\n", "scope %s", scope)
	}
}
