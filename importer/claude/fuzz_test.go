package claude

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore/internal/workspace"
	"github.com/stretchr/testify/require"
)

// seedLines adds the fixture's lines to f.
func seedLines(f *testing.F) {
	data, err := os.ReadFile(fixtureMain)
	require.NoError(f, err)
	for line := range bytes.Lines(data) {
		f.Add(bytes.TrimSuffix(line, []byte("\n")))
	}
	f.Add([]byte(`{"type":"user","uuid":"x","timestamp":"2026-01-01T00:00:00Z","message":{"content":[{"type":"tool_result","content":[{"type":"image","source":{}}]}]}}`))
	f.Add([]byte(`{"type":"assistant","uuid":"x","timestamp":"2026-01-01T00:00:00Z","message":{"content":"plain"}}`))
	f.Add([]byte(`{"type":"user","uuid":"x","parentUuid":"x","timestamp":"2026-01-01T00:00:00Z","message":{}}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(``))
}

// FuzzParseLine: any bytes give a record or an error, never a panic; a
// record has a type, a conversation record a time, and its events
// records that are JSON.
func FuzzParseLine(f *testing.F) {
	seedLines(f)
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := parseLine(line)
		if err != nil {
			require.Nil(t, r)
			return
		}
		require.NotEmpty(t, r.Type)
		if r.UUID == "" {
			return
		}
		require.False(t, r.time.IsZero())
		if r.msg == nil {
			return
		}
		evs := userEvents(r.msg)
		if r.Type == "assistant" {
			evs = assistantEvents(r.msg)
		}
		require.NotEmpty(t, evs)
		for _, ev := range evs {
			require.True(t, json.Valid(ev.Record), "record %s", ev.Record)
		}
	})
}

// FuzzParseFile: a file of any lines gives sessions that are trees, parents
// before children, with one root and a leaf for HEAD (what importer.Write
// requires), and every line is an event, skipped or reported.
func FuzzParseFile(f *testing.F) {
	data, err := os.ReadFile(fixtureMain)
	require.NoError(f, err)
	f.Add(data)
	f.Add([]byte("{\"type\":\"user\",\"uuid\":\"a\",\"parentUuid\":\"b\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"message\":{\"content\":\"x\"}}\n" +
		"{\"type\":\"user\",\"uuid\":\"b\",\"parentUuid\":\"a\",\"timestamp\":\"2026-01-01T00:00:01Z\",\"message\":{\"content\":\"y\"}}\n"))
	f.Add([]byte("{\"type\":\"system\",\"subtype\":\"compact_boundary\",\"uuid\":\"c\",\"logicalParentUuid\":\"z\",\"timestamp\":\"2026-01-01T00:00:00Z\"}\n"))
	f.Add([]byte(strings.Join(hostileLines("s"), "\n") + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file := parseFile("fuzz.jsonl", data)
		require.LessOrEqual(t, file.Skipped, file.Lines)
		require.LessOrEqual(t, file.History.Lines, file.Skipped)
		for _, info := range file.infos {
			if info.history == nil {
				continue
			}
			for _, p := range info.history.places {
				require.NotEmpty(t, p.files)
				for _, b := range p.files {
					require.NoError(t, workspace.CheckPath(b.path))
					if b.name != "" {
						require.Empty(t, checkName(b.name))
					}
				}
			}
		}
		for _, s := range file.Sessions {
			seen := map[uuid.UUID]bool{}
			parents := map[uuid.UUID]bool{}
			roots := 0
			for _, ev := range s.Events {
				require.NotEqual(t, uuid.Nil, ev.ID)
				require.False(t, seen[ev.ID], "repeated id")
				if ev.ParentID == uuid.Nil {
					roots++
				} else {
					require.True(t, seen[ev.ParentID], "parent after child")
				}
				require.True(t, json.Valid(ev.Record))
				seen[ev.ID] = true
				parents[ev.ParentID] = true
			}
			require.Equal(t, 1, roots)
			require.True(t, seen[s.Head])
			require.False(t, parents[s.Head], "HEAD is a leaf")
		}
	})
}
