package zchunk

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/sessionstore/sessionstore/internal/jsonl"
)

// transcript returns a deterministic, realistic chunk: framed event lines
// like the store writes, of an agent session with prose messages,
// reasoning, tool calls and tool results (source files read again and
// again, test runs, directory listings, grep output), at least minSize
// bytes long. When bigLine is set one tool result, in the middle, is a line
// several times BlockSize long.
func transcript(seed uint64, minSize int, bigLine bool) []byte {
	g := &gen{rng: rand.New(rand.NewPCG(seed, seed+1)), t: time.Date(2026, 8, 25, 17, 21, 25, 454897183, time.UTC)}
	var out []byte
	bigDone := !bigLine
	for len(out) < minSize || !bigDone {
		if !bigDone && len(out) >= minSize/2 {
			out = g.event(out, "tool_result", "tool", map[string]any{
				"call_id": g.callID(), "output": g.bigFile(4*BlockSize + 12345),
			})
			bigDone = true
			continue
		}
		out = g.turn(out)
	}
	return out
}

type gen struct {
	rng    *rand.Rand
	t      time.Time
	n      uint64
	last   string
	calls  int
	tokens int
}

var words = strings.Fields(`the a of to and in is that for it this with as on be
	test function error file package return value we should need can will
	build fails because missing import type interface method struct field
	index chunk session event record offset length checksum sync rename
	directory crash recovery append branch head parent compress frame block
	reader writer buffer cache latency throughput benchmark fix refactor
	approach instead let me check run again looks good now passes`)

func (g *gen) prose(nWords int) string {
	var b strings.Builder
	for i := range nWords {
		w := words[g.rng.IntN(len(words))]
		if i == 0 || b.String()[b.Len()-1] == '.' {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		if g.rng.IntN(12) == 0 {
			b.WriteByte('.')
		}
	}
	b.WriteByte('.')
	return b.String()
}

var files = []string{"store.go", "chunk.go", "index.go", "recovery.go", "session.go", "internal/vfs/memfs.go", "internal/jsonl/frame.go"}

// source returns the (stable, so repeated) contents of a source file.
func source(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\nimport (\n\t\"errors\"\n\t\"fmt\"\n\t\"os\"\n)\n\n", strings.TrimSuffix(name[strings.LastIndex(name, "/")+1:], ".go"))
	for i := range 40 {
		fmt.Fprintf(&b, "// handle%d processes one %s record and reports whether it was valid.\n", i, name)
		fmt.Fprintf(&b, "func (s *state) handle%d(rec []byte, off int64) (bool, error) {\n", i)
		fmt.Fprintf(&b, "\tif len(rec) < %d {\n\t\treturn false, fmt.Errorf(\"%%s: record at %%d too short\", s.path, off)\n\t}\n", i+8)
		fmt.Fprintf(&b, "\tif err := s.check(rec, %d); err != nil {\n\t\treturn false, errors.Join(err, os.ErrInvalid)\n\t}\n\treturn true, nil\n}\n\n", i)
	}
	return b.String()
}

func (g *gen) testRun() string {
	var b strings.Builder
	fail := g.rng.IntN(3) == 0
	for i := range 10 + g.rng.IntN(30) {
		fmt.Fprintf(&b, "=== RUN   TestStore%d\n--- PASS: TestStore%d (0.%02ds)\n", i, i, g.rng.IntN(100))
	}
	if fail {
		b.WriteString("--- FAIL: TestRecovery (0.03s)\n    recovery_test.go:88: \n        \tError Trace:\trecovery_test.go:88\n        \tError:      \tNot equal: expected: 3, actual: 2\nFAIL\nFAIL\tgithub.com/sessionstore/sessionstore\t1.234s\n")
	} else {
		fmt.Fprintf(&b, "PASS\nok  \tgithub.com/sessionstore/sessionstore\t%d.%03ds\n", g.rng.IntN(5), g.rng.IntN(1000))
	}
	return b.String()
}

func (g *gen) listing() string {
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "-rw-r--r-- 1 dev dev %6d Aug 25 17:%02d %s\n", 1000+g.rng.IntN(30000), g.rng.IntN(60), f)
	}
	return b.String()
}

func (g *gen) grep() string {
	var b strings.Builder
	for range 3 + g.rng.IntN(15) {
		f := files[g.rng.IntN(len(files))]
		fmt.Fprintf(&b, "%s:%d:\tif err := s.check(rec, %d); err != nil {\n", f, 10+g.rng.IntN(400), g.rng.IntN(40))
	}
	return b.String()
}

func (g *gen) bigFile(n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(source(files[g.rng.IntN(len(files))]))
	}
	return b.String()[:n]
}

func (g *gen) callID() string { return fmt.Sprintf("call_%d", g.calls) }

func (g *gen) event(out []byte, kind, role string, record map[string]any) []byte {
	g.n++
	g.t = g.t.Add(time.Duration(500+g.rng.IntN(20000)) * time.Millisecond)
	id := fmt.Sprintf("01a039f0-%04x-7000-8000-%012x", g.rng.IntN(1<<16), g.n)
	parent := g.last
	if parent == "" {
		parent = "00000000-0000-0000-0000-000000000000"
	}
	g.last = id
	rec, err := json.Marshal(record)
	if err != nil {
		panic(err)
	}
	obj := fmt.Sprintf(`{"id":%q,"parent_id":%q,"kind":%q,"role":%q,"timestamp":%q,"record":%s}`,
		id, parent, kind, role, g.t.Format(time.RFC3339Nano), rec)
	return jsonl.Seal(out, []byte(obj))
}

// turn appends a user message, then assistant steps with tool calls and
// results, then an assistant answer.
func (g *gen) turn(out []byte) []byte {
	out = g.event(out, "message", "user", map[string]any{"content": g.prose(5 + g.rng.IntN(80))})
	for range g.rng.IntN(6) {
		g.calls++
		var name string
		var args map[string]any
		var output string
		switch g.rng.IntN(4) {
		case 0:
			f := files[g.rng.IntN(len(files))]
			name, args, output = "read_file", map[string]any{"path": f}, source(f)
		case 1:
			name, args, output = "run_tests", map[string]any{"pkg": "./...", "race": true}, g.testRun()
		case 2:
			name, args, output = "bash", map[string]any{"command": "ls -l"}, g.listing()
		default:
			name, args, output = "grep", map[string]any{"pattern": "s.check(rec"}, g.grep()
		}
		g.tokens += 100 + g.rng.IntN(5000)
		out = g.event(out, "message", "assistant", map[string]any{
			"content": g.prose(3 + g.rng.IntN(30)), "reasoning": g.prose(10 + g.rng.IntN(60)), "model": "model-name",
			"usage": map[string]int{"input_tokens": g.tokens, "output_tokens": 10 + g.rng.IntN(400)},
		})
		out = g.event(out, "tool_call", "assistant", map[string]any{"call_id": g.callID(), "name": name, "arguments": args})
		out = g.event(out, "tool_result", "tool", map[string]any{"call_id": g.callID(), "output": output})
	}
	return g.event(out, "message", "assistant", map[string]any{"content": g.prose(20 + g.rng.IntN(300)), "model": "model-name"})
}
